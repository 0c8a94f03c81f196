#!/usr/bin/env bash
# The bash completion script, driven through bash itself: it completes
# subcommands, flags, *.yaml files where a job file goes, and job ids and
# names from the store in BARGE_HOME where a job goes (`barge logs <TAB>`).
# Usage: completion_test.sh PATH_TO_BARGE   (needs no Docker: the job it
# completes fails in preflight, which is enough to be recorded)
. "$(dirname "$0")/lib.sh"

# A recorded job: its image is absent and may not be pulled, so it fails in
# preflight (or earlier, without Docker) and is recorded all the same.
cat >"$SCRATCH/done.yaml" <<'YAML'
name: compjob
image: barge/no-such-image:never
image_pull: never
YAML
"$BARGE" run "$SCRATCH/done.yaml" >/dev/null 2>&1
id=$("$BARGE" ls --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
check "a job is recorded in the scratch store (id '$id')" test -n "$id"

"$BARGE" completion bash >"$SCRATCH/barge.bash"
check "the bash script parses" bash -n "$SCRATCH/barge.bash"

# complete WORDS...: the candidates bash's completion function offers for
# the command line WORDS (the last word being completed), one a line.
complete_words() {
  (
    cd "$SCRATCH" || exit 1
    PATH=$(dirname "$BARGE"):$PATH bash --norc --noprofile -c '
      source "$1"; shift
      complete -p barge >/dev/null || exit 3
      COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
      COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
      _barge barge "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
      printf "%s\n" "${COMPREPLY[@]}"' bash "$SCRATCH/barge.bash" "$@"
  )
}
has() { grep -qxF -- "$2" <<<"$1" || { printf '  %s not among:\n%s\n' "$2" "$1" >&2; return 1; }; }

out=$(complete_words barge "")
check "barge <TAB> offers run" has "$out" run
check "barge <TAB> offers logs" has "$out" logs
check "barge <TAB> offers completion" has "$out" completion
check "barge <TAB> hides __complete-jobs" bash -c '! grep -q __complete <<<"$1"' _ "$out"
out=$(complete_words barge l)
check "barge l<TAB> offers ls and logs only" test "$(sort <<<"$out" | tr '\n' ' ')" = "logs ls "
out=$(complete_words barge logs "")
check "barge logs <TAB> offers the recorded job id" has "$out" "$id"
check "barge logs <TAB> offers the job's name" has "$out" compjob
out=$(complete_words barge show "${id:0:3}")
check "barge show PREFIX<TAB> completes the id" has "$out" "$id"
out=$(complete_words barge logs --f)
check "barge logs --f<TAB> offers --follow" has "$out" --follow
out=$(complete_words barge run "")
check "barge run <TAB> offers the .yaml file" has "$out" done.yaml
check "barge run <TAB> offers no other file" bash -c '! grep -q barge.bash <<<"$1"' _ "$out"
out=$(complete_words barge run --hosts-file "")
check "barge run --hosts-file <TAB> offers .yaml files" has "$out" done.yaml
out=$(complete_words barge completion "")
check "barge completion <TAB> offers the shells" test "$(tr '\n' ' ' <<<"$out")" = "bash zsh fish "

# The zsh and fish scripts are generated from the same tree.
"$BARGE" completion zsh >"$SCRATCH/_barge"
check "the zsh script completes job ids through the store" grep -q '__complete-jobs' "$SCRATCH/_barge"
check "the zsh script knows rerun" grep -q "'rerun:" "$SCRATCH/_barge"
"$BARGE" completion fish >"$SCRATCH/barge.fish"
check "the fish script offers logs with its --follow" grep -q "__fish_seen_subcommand_from logs' -s f -l follow" "$SCRATCH/barge.fish"
finish
