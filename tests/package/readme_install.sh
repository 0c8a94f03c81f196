#!/usr/bin/env bash
# Runs the shell commands of the README's "## Install" section, in the order
# the README gives them, as a new user would right after
# scripts/quickstart.sh (bench/fresh-machine.sh runs it there), then checks
# what they promise: /usr/local/bin/barge answers `version`, the man page,
# completions and schema are installed under /usr/local, and the Debian
# package is installed (`dpkg -s barge`, /usr/bin/barge). It then removes
# both installs (apt-get remove barge; the files in build/install_manifest.txt)
# so that what runs next finds the machine as the quick start left it.
#
# Usage: tests/package/readme_install.sh   (root, in the repository root,
# with ./build from the quick start)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
die() { echo "readme_install: FAIL: $*" >&2; exit 1; }
((EUID == 0)) || die "needs root (apt-get, /usr/local)"
[[ -f build/CPackConfig.cmake ]] || die "no ./build here: the README's commands run on the build tree the quick start or scripts/test.sh made"

# The README's Install section: every line inside its ```sh blocks, comments
# stripped, in order.
mapfile -t commands < <(awk '
  /^## / { in_section = ($0 == "## Install") }
  in_section && /^```sh$/ { in_block = 1; next }
  in_block && /^```$/ { in_block = 0; next }
  in_section && in_block { sub(/[[:space:]]+#.*$/, ""); if ($0 != "") print }' README.md)
((${#commands[@]} >= 3)) || die "found ${#commands[@]} command(s) in the README's Install section, expected the install, cpack and apt lines"
export DEBIAN_FRONTEND=noninteractive
for c in "${commands[@]}"; do
  echo "readme_install: \$ $c"
  bash -euo pipefail -c "$c" </dev/null || die "the README's command failed: $c"
done

echo "readme_install: checking what they installed"
/usr/local/bin/barge version || die "/usr/local/bin/barge version failed"
for f in /usr/local/share/man/man1/barge.1.gz /usr/local/share/bash-completion/completions/barge \
         /usr/local/share/zsh/vendor-completions/_barge /usr/local/share/fish/vendor_completions.d/barge.fish \
         /usr/local/share/barge/job.schema.json; do
  [[ -s $f ]] || die "cmake --install left no $f"
done
dpkg -s barge >/dev/null 2>&1 || die "the Debian package is not installed"
/usr/bin/barge version || die "/usr/bin/barge (the package's) version failed"

apt-get remove -y barge >/dev/null || die "apt-get remove barge failed"
xargs -d '\n' rm -f <build/install_manifest.txt
echo "readme_install: ok (${#commands[@]} commands)"
