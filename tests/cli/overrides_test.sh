#!/usr/bin/env bash
# `--set`/`--env`/`--name` change what `barge plan` prints; a bad `--set` is
# exit 125 with the message naming it; `barge` alone prints the help (0);
# `--version` and `version` agree.
# Usage: overrides_test.sh PATH_TO_BARGE   (needs no Docker: plan connects to nothing)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

out=$("$BARGE" plan "$SRC/samples/hello.yaml" 2>&1)
check "plan without overrides shows the file's shm size" contains "$out" "--shm-size 256m"
out=$("$BARGE" plan "$SRC/samples/hello.yaml" --set container.shm_size=8g --env EPOCHS=5 --name exp7 \
  --set 'container.cap_add=[SYS_ADMIN, NET_ADMIN]' 2>&1)
check "--set changes the plan's --shm-size" contains "$out" "--shm-size 8g"
check "--env adds the variable to the plan" contains "$out" "-e EPOCHS=5"
check "--name renames the job in the plan" contains "$out" "--name barge-exp7-"
check "a flow list replaces the list" contains "$out" "--cap-add SYS_ADMIN --cap-add NET_ADMIN"
check "the plan lists the overrides" contains "$out" "# overrides: --set container.shm_size=8g --env EPOCHS=5"

out=$("$BARGE" plan "$SRC/samples/local-cluster.yaml" --set hosts.0.nodes=4 --set roles.worker.count=3 2>&1)
n=$(grep -cE '^(#   )?docker (run|create) ' <<<"$out")  # a create made through the Engine API is shown as a comment
check "--set hosts.0.nodes=4 with 3 workers plans 4 containers (got $n)" test "$n" = 4

out=$("$BARGE" plan "$SRC/samples/hello.yaml" --set container.shm_sise=8g 2>&1)
rc=$?
check "a bad --set exits 125 (got $rc)" test "$rc" = 125
check "a bad --set names the override and suggests the key" contains "$out" \
  "--set container.shm_sise: unknown key; did you mean 'shm_size'?"

"$BARGE" >"$SCRATCH/help" 2>&1
rc=$?
check "barge alone exits 0 (got $rc)" test "$rc" = 0
check "barge alone prints the help" grep -q "Subcommands:" "$SCRATCH/help"
"$BARGE" no-such-command >/dev/null 2>&1
rc=$?
check "an unknown subcommand exits 125 (got $rc)" test "$rc" = 125
v1=$("$BARGE" --version)
v2=$("$BARGE" version)
check "--version and version agree ($v1)" test "$v1" = "$v2"
check "the version names a commit" contains "$v1" "(commit "

# config.yaml: validated with file:line errors.
mkdir -p "$XDG_CONFIG_HOME/barge"
printf 'ssh:\n  usr: alice\n' >"$XDG_CONFIG_HOME/barge/config.yaml"
out=$("$BARGE" plan "$SRC/samples/hello.yaml" 2>&1)
check "a bad config.yaml is reported with file:line:key" contains "$out" \
  "$XDG_CONFIG_HOME/barge/config.yaml:2:3: ssh.usr: unknown key; did you mean 'user'?"
finish
