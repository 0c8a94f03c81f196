#!/bin/sh
# Writes what barge generates about itself into OUTDIR, from the built
# binary: the man page (gzipped, as Debian installs them), the bash, zsh and
# fish completion scripts and the job file's JSON Schema.
# Usage: gen_docs.sh BARGE OUTDIR
set -eu
barge=$1
out=$2
mkdir -p "$out"
"$barge" manpage >"$out/barge.1.tmp"
gzip -9n <"$out/barge.1.tmp" >"$out/barge.1.gz"
mv "$out/barge.1.tmp" "$out/barge.1"
"$barge" completion bash >"$out/barge.bash"
"$barge" completion zsh >"$out/_barge"
"$barge" completion fish >"$out/barge.fish"
"$barge" schema >"$out/job.schema.json"
