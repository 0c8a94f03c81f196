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
#
# INSTALL_DEPS_NO_START=1: the packages' maintainer scripts must not start
# their services on this machine (the caller runs its own instances, e.g. the
# test bed's munge and Slurm): a /usr/sbin/policy-rc.d that refuses every
# start (exit 101; invoke-rc.d and deb-systemd-invoke honour it) is in place
# during the install, made only if none is there and removed afterwards,
# failure included; and a program of the installed packages that runs after
# the install and did not before (a maintainer script that started it some
# other way) is stopped.
set -euo pipefail

packages=(
  # build (GoogleTest is the tests': scripts/test.sh)
  g++ cmake ninja-build pkg-config ccache
  libssh-dev libcurl4-openssl-dev nlohmann-json3-dev libyaml-cpp-dev
  libspdlog-dev libcli11-dev libsqlite3-dev libcpp-httplib-dev libssl-dev
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

no_start=${INSTALL_DEPS_NO_START:-0}
policy=/usr/sbin/policy-rc.d
made_policy=0
pids_before=""
if [[ "$no_start" == 1 ]]; then
  pids_before=$(ps -e -o pid= | tr -d ' ' | sort)
  # set -C: not over one that is there (that one is the machine's, kept).
  if "${as_root[@]}" sh -c "set -C; printf '#!/bin/sh\n# install-deps.sh (INSTALL_DEPS_NO_START=1)\nexit 101\n' >$policy" 2>/dev/null; then
    made_policy=1
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
    "${as_root[@]}" chmod 0755 "$policy"
  else
    echo "install-deps: $policy is there already; leaving it as it is"
  fi
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null
if ((made_policy)); then
  "${as_root[@]}" rm -f "$policy"
  trap - EXIT
fi
if [[ "$no_start" == 1 ]]; then
  # Programs of the new packages (by name, as ps shows it: 15 characters)
  # running in processes that are new since the install began.
  declare -A progs=()
  while read -r f; do
    [[ -f "$f" && -x "$f" ]] && progs[$(basename "$f" | cut -c1-15)]=1
  done < <(dpkg -L "${missing[@]}" 2>/dev/null | grep -E '/(s?bin|libexec)/' || true)
  stop=()
  while read -r pid comm; do
    [[ -n "${progs[$comm]:-}" ]] || continue
    grep -qx "$pid" <<<"$pids_before" || stop+=("$pid")
  done < <(ps -e -o pid=,comm=)
  if ((${#stop[@]})); then
    echo "install-deps: stopping what the install started: $(IFS=,; ps -o pid=,comm= -p "${stop[*]}" | tr -s ' \n' ' ')"
    "${as_root[@]}" kill -TERM "${stop[@]}" 2>/dev/null || true
  fi
fi

still=()
for p in "${missing[@]}"; do
  installed "$p" || still+=("$p")
done
if ((${#still[@]})); then
  echo "install-deps: still missing after apt-get install: ${still[*]}" >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}"
