#!/usr/bin/env bash
# Installs, with apt-get, whatever barge's build and quick start need and
# this Debian machine lacks: the compiler and libraries, the Docker engine,
# the ssh client and busybox (the demo image). The test suite's own packages
# are scripts/test.sh's list, given here as arguments. Idempotent and
# non-interactive: when every package is already installed it changes
# nothing and runs no `apt-get update`.
#
# Usage: scripts/install-deps.sh [EXTRA_PACKAGE...]
# Runs as root, or through `sudo -n` when that works; otherwise it prints the
# command to run and exits 1.
set -euo pipefail

packages=(
  # build (GoogleTest is the tests': scripts/test.sh)
  g++ cmake ninja-build pkg-config ccache
  libssh-dev libcurl4-openssl-dev nlohmann-json3-dev libyaml-cpp-dev
  libspdlog-dev libcli11-dev libsqlite3-dev libcpp-httplib-dev
  # what barge runs, and the quick start's engine and demo image
  docker.io openssh-client tar busybox-static
)
packages+=("$@")

installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: missing: ${missing[*]}"

as_root=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    echo "install-deps: not root and no password-less sudo; run as root:" >&2
    echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q --no-install-recommends
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null

still=()
for p in "${missing[@]}"; do
  installed "$p" || still+=("$p")
done
if ((${#still[@]})); then
  echo "install-deps: still missing after apt-get install: ${still[*]}" >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}"
