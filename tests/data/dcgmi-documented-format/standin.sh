#!/bin/sh
# A stand-in `dcgmi` for tests (see README.md): answers `diag -r 1 -j
# [-i IDS]` in DCGM 3's documented JSON form, and nothing else.
set -u
[ -n "${STANDIN_DCGM_LOG:-}" ] && echo "$*" >> "$STANDIN_DCGM_LOG"
if [ "${STANDIN_DCGM_NOENGINE:-}" = 1 ]; then
  echo 'Error: unable to establish a connection to the specified host: localhost'
  echo 'Error: Unable to connect to host engine. Host engine connection invalid/disconnected.'
  exit 255
fi
case "$*" in
  "diag -r 1 -j"|"diag -r 1 -j -i "*) ;;
  *) echo "standin dcgmi: no answer for: $*" >&2; exit 2 ;;
esac
ids=0
[ "${5:-}" = -i ] && ids=$6
pass() { printf '          { "name" : "%s", "results" : [ { "status" : "Pass" } ] },\n' "$1"; }
rc=0
echo '{'
echo '  "DCGM GPU Diagnostic" : {'
echo '    "test_categories" : ['
echo '      {'
echo '        "category" : "Deployment",'
echo '        "tests" : ['
for t in Denylist "NVML Library" "CUDA Main Library" "Permissions and OS Blocks" "Persistence Mode" \
         "Environment Variables"; do pass "$t"; done
printf '          { "name" : "Page Retirement/Row Remap", "results" : ['
sep=
for g in $(echo "$ids" | tr ',' ' '); do
  if [ "${STANDIN_DCGM_FAIL:-}" = "$g" ]; then
    printf '%s\n            { "gpu_ids" : "%s", "status" : "Fail", "warnings" : [ { "warning" : "GPU %s had uncorrectable memory errors and row remapping failed. Run a field diagnostic on the GPU.", "error_id" : 84 } ] }' "$sep" "$g" "$g"
    rc=226
  else
    printf '%s\n            { "gpu_ids" : "%s", "status" : "Pass" }' "$sep" "$g"
  fi
  sep=,
done
printf ' ] },\n'
pass "Graphics Processes"
echo '          { "name" : "Inforom", "results" : [ { "status" : "Pass" } ] }'
echo '        ]'
echo '      }'
echo '    ],'
echo '    "version" : "3.3.5"'
echo '  }'
echo '}'
exit $rc
