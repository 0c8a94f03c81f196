#!/usr/bin/env bash
# An artifact with `local: false` goes from the container to object storage
# with no copy on the controller's disk and without the controller holding
# the file: every file arrives byte for byte (MD5 compared on download),
# the run directory has no artifacts/, the controller's peak RSS stays far
# below the file's size, and a rerun sends nothing that is already there
# (the host's listing gives the MD5s). Runs on the local Docker engine with
# the demo image against moto's S3 server on loopback
# (tests/support/s3_server.py, SigV4 checked).
# Usage: s3_stream_test.sh PATH_TO_BARGE   (needs a Docker engine and Python's moto: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

mkfifo "$SCRATCH/server.in"
S3_SERVER_LOG=$SCRATCH/requests.log python3 "$SRC/tests/support/s3_server.py" barge-test \
  <"$SCRATCH/server.in" >"$SCRATCH/server.out" 2>"$SCRATCH/server.err" &
server=$!
exec 4>"$SCRATCH/server.in"
cleanup() {
  exec 4>&-
  kill "$server" 2>/dev/null
  wait 2>/dev/null
  rm -rf -- "$SCRATCH"
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -s "$SCRATCH/server.out" ]] && break; sleep 0.2; done
read -r PORT S3_KEY S3_SECRET <"$SCRATCH/server.out" || { echo "FAIL: the S3 server did not start: $(cat "$SCRATCH/server.err")" >&2; exit 1; }
export S3_KEY S3_SECRET

# 160 MiB (S3_STREAM_SIZE): 32 parts of 5 MiB, 2 at a time; a small file, an empty one, a
# symlink (not a file: not sent) and a name with a space.
SIZE=${S3_STREAM_SIZE:-167772160}
cat >"$SCRATCH/job.yaml" <<YAML
name: s3-stream
image: barge/demo:local
command: ["sh", "-c", "mkdir -p '/ckpt/step 2' && yes barge-stream-test | head -c $SIZE > '/ckpt/step 2/model.bin' && echo 'loss 0.42' > /ckpt/metrics.txt && : > /ckpt/empty && ln -s metrics.txt /ckpt/link && echo written"]
storage:
  endpoint: http://127.0.0.1:$PORT
  addressing: path
  access_key: {env: S3_KEY}
  secret_key: {env: S3_SECRET}
  part_size: 5m
  parallel: 2
artifacts:
  - path: /ckpt
    local: false
    to: s3://barge-test/stream/rank-{rank}
YAML
# The controller's own peak RSS (VmHWM, sampled until it exits).
(cd "$SCRATCH" && python3 - "$BARGE" run job.yaml >"$SCRATCH/first.out" 2>&1 <<'PY'
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:])
peak = 0
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.02)
sys.stdout.flush()
print("peak-rss-kib", peak)
sys.exit(p.returncode)
PY
)
rc=$?
out=$(cat "$SCRATCH/first.out")
check "the job succeeds (rc $rc)" test "$rc" = 0
check "three files sent" contains "$out" "sent to s3://: 3 file(s), 0 already there, 0 failed"
job=$("$BARGE" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
check "no copy in the run directory" test ! -e "$BARGE_HOME/runs/$job/artifacts"
peak=$(sed -n 's/^peak-rss-kib //p' "$SCRATCH/first.out")
# Whole-file buffering would need the file's size; the bound by design is
# about 20 MiB of baseline, (parallel + 2) x part_size and 4 MiB of pipe.
check "the controller's peak RSS ($peak KiB) is under half the file's size" test "${peak:-999999999}" -lt $((SIZE / 1024 / 2))
check "the objects hold the files' bytes" python3 - "$PORT" "$S3_KEY" "$S3_SECRET" "$(yes barge-stream-test | head -c $SIZE | md5sum | cut -d' ' -f1)" $(((SIZE + 5242879) / 5242880)) <<'PY'
import boto3, hashlib, sys
from botocore.config import Config
port, key, secret, md5, parts = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1", aws_access_key_id=key,
                  aws_secret_access_key=secret, config=Config(s3={"addressing_style": "path"}))
try:
    s3.head_object(Bucket="barge-test", Key="stream/rank-0/ckpt/link")
    sys.exit("the symlink was sent")
except s3.exceptions.ClientError:
    pass
get = lambda k: s3.get_object(Bucket="barge-test", Key=k)
big = get("stream/rank-0/ckpt/step 2/model.bin")
ok = (hashlib.md5(big["Body"].read()).hexdigest() == md5 and big["ETag"].strip('"').endswith("-" + parts)
      and get("stream/rank-0/ckpt/metrics.txt")["Body"].read() == b"loss 0.42\n"
      and get("stream/rank-0/ckpt/empty")["Body"].read() == b"")
sys.exit(0 if ok else "the bytes or the part count differ")
PY
out=$("$BARGE" show "$job" 2>&1)
check "show lists the streamed file with its source" contains "$out" "local:/ckpt/step 2/model.bin"

mark=$(($(wc -l <"$SCRATCH/requests.log") + 1))
out=$(cd / && "$BARGE" rerun "$job" 2>&1)
rc=$?
check "rerun succeeds (rc $rc)" test "$rc" = 0
check "rerun finds every file already there" contains "$out" "sent to s3://: 0 file(s), 3 already there, 0 failed"
puts=$(tail -n +"$mark" "$SCRATCH/requests.log" | grep -c '"PUT ')
check "rerun sent no bytes to the store ($puts PUTs)" test "$puts" = 0
finish
