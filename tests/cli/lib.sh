# Shared by the tests/cli/*_test.sh scripts: a scratch BARGE_HOME and
# XDG_CONFIG_HOME, check helpers that count, and the closing line.
# Usage in a test: . "$(dirname "$0")/lib.sh"; BARGE=$1
set -uo pipefail
BARGE=${1:?usage: $0 PATH_TO_BARGE}
[[ -x "$BARGE" ]] || { echo "FAIL: $BARGE is not an executable" >&2; exit 1; }
BARGE=$(realpath "$BARGE")
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/barge-cli-test.XXXXXX")
export BARGE_HOME=$SCRATCH/state XDG_CONFIG_HOME=$SCRATCH/config NO_COLOR=1
# The suite's user defaults (tests/support/xdg/barge/config.yaml: a host's
# failure record counts only its last second); a test may write its own.
mkdir -p "$XDG_CONFIG_HOME/barge"
cp "$(dirname "${BASH_SOURCE[0]}")/../support/xdg/barge/config.yaml" "$XDG_CONFIG_HOME/barge/config.yaml"
# The failure record's entries (runner/remote/host_record.h: created, never
# started, named barge-fault-*, labelled barge.fault) that a test's jobs left
# on this machine's engine, removed when the test ends.
clear_fault_records() {
  command -v docker >/dev/null 2>&1 || return 0
  local ids
  ids=$(env -u DOCKER_HOST timeout 20 docker ps -aq --filter 'name=^/?barge-fault-' --filter label=barge.fault 2>/dev/null) || return 0
  # shellcheck disable=SC2086  # one word per ID
  [[ -z "$ids" ]] || env -u DOCKER_HOST timeout 20 docker rm -f $ids >/dev/null 2>&1 || true
}
trap 'clear_fault_records; rm -rf -- "$SCRATCH"' EXIT
passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
# check DESCRIPTION COMMAND...: passes when COMMAND succeeds.
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
# contains TEXT NEEDLE
contains() { [[ "$1" == *"$2"* ]] || { printf '  expected to contain: %s\n  got: %s\n' "$2" "$1" >&2; return 1; }; }
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0))
}
