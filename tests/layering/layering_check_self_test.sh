#!/usr/bin/env bash
# scripts/layering-check can fail: on a copy of the tree (product folders
# and their CMakeLists.txt) it passes, then each planted break alone makes
# it exit 1 naming the file and what is wrong: an include of a folder
# above, a cycle, a link without an include, an include without a link, a
# test reaching above its folder without a reason, product code including
# tests/, and a function over 120 lines.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
check=$src/scripts/layering-check
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh() {
  rm -rf "$work/t"
  mkdir -p "$work/t"
  (cd "$src" && find base ssh container cluster runner \( -name '*.cc' -o -name '*.h' -o -name CMakeLists.txt \) \
     -print0 | tar --null -T - -cf -) | tar -C "$work/t" -xf -
}
failed=0
# expect NAME TEXT: the check fails on the current copy and says TEXT.
expect() {
  local out rc=0
  out=$("$check" --root "$work/t" 2>&1) || rc=$?
  if ((rc != 1)) || ! grep -qF -- "$2" <<<"$out"; then
    echo "FAIL $1: exit $rc, wanted 1 and '$2' in:"; sed 's/^/  | /' <<<"$out" | tail -n 8
    failed=1
  else
    echo "ok   $1"
  fi
}
fresh
if ! out=$("$check" --root "$work/t" 2>&1); then
  echo "FAIL the unbroken copy: $out"; exit 1
fi
echo "ok   the unbroken copy passes"

fresh; echo '#include "runner/controller/controller.h"' >>"$work/t/runner/remote/slurm.cc"
expect "an include of a folder above" "runner/remote/slurm.cc:"
fresh; echo '#include "runner/remote/slurm.h"' >>"$work/t/runner/jobfile/job_spec.h"
expect "a cycle through includes" "cycle: "
fresh; sed -i 's/^\(target_link_libraries(barge_logs PUBLIC\)/\1 barge_ssh/' "$work/t/runner/logs/CMakeLists.txt"
expect "a link without an include" "barge_logs links barge_ssh, but runner/logs includes nothing from ssh"
fresh; echo '#include "cluster/plan.h"' >>"$work/t/runner/console/color.cc"
expect "an include without a link (and against the rule)" "runner/console/color.cc:"
fresh; echo '#include "cluster/plan.h"' >>"$work/t/runner/store/job_store.cc"
expect "an include without a link" "barge_store includes from cluster but does not link barge_cluster"
fresh; echo '#include "runner/cli/verbs.h"' >>"$work/t/runner/store/job_store_test.cc"
expect "a test reaching above without a reason" "runner/store/job_store_test.cc:"
fresh; echo '#include "tests/support/sleeper.h"' >>"$work/t/base/peer_owner.cc"
expect "product code including tests/" "product code includes tests/"
fresh; { echo 'int TooLong() {'; for i in $(seq 1 125); do echo "  int v$i = $i;"; done; echo '  return 0;'; echo '}'; } \
  >>"$work/t/base/peer_owner.cc"
expect "a function over 120 lines" "TooLong is 128 lines"
exit $failed
