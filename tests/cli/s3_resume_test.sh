#!/usr/bin/env bash
# An artifact upload cut short by a kill of the controller is resumed by
# `barge rerun` (a new job, a new run directory) without sending again the
# parts the server holds, and `barge show` lists where each file went. Runs
# on the local Docker engine with the demo image, against moto's S3 server
# on loopback (tests/support/s3_server.py, SigV4 checked), whose request log
# counts the parts each run sent.
# Usage: s3_resume_test.sh PATH_TO_BARGE   (needs a Docker engine and Python's moto: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

# The server: serves until its stdin (a fifo held open on fd 4) closes.
mkfifo "$SCRATCH/server.in"
S3_SERVER_LOG=$SCRATCH/requests.log python3 "$SRC/tests/support/s3_server.py" barge-test \
  <"$SCRATCH/server.in" >"$SCRATCH/server.out" 2>"$SCRATCH/server.err" &
server=$!
exec 4>"$SCRATCH/server.in"
run=""
cleanup() {
  [[ -n "$run" ]] && kill -9 "$run" 2>/dev/null
  exec 4>&-
  kill "$server" 2>/dev/null
  wait 2>/dev/null
  rm -rf -- "$SCRATCH"
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -s "$SCRATCH/server.out" ]] && break; sleep 0.2; done
read -r PORT S3_KEY S3_SECRET <"$SCRATCH/server.out" || { echo "FAIL: the S3 server did not start: $(cat "$SCRATCH/server.err")" >&2; exit 1; }
export S3_KEY S3_SECRET

# 60 MiB of known bytes: 12 parts of 5 MiB, sent one at a time.
SIZE=62914560
cat >"$SCRATCH/job.yaml" <<YAML
name: s3-resume
image: barge/demo:local
command: ["sh", "-c", "mkdir -p /ckpt && yes barge-resume-test | head -c $SIZE > /ckpt/model.bin && echo written"]
storage:
  endpoint: http://127.0.0.1:$PORT
  addressing: path
  access_key: {env: S3_KEY}
  secret_key: {env: S3_SECRET}
  part_size: 5m
  parallel: 1
artifacts:
  - path: /ckpt
    to: s3://barge-test/resume/rank-{rank}
YAML
KEY=/barge-test/resume/rank-0/ckpt/model.bin
# The part numbers the server stored (answered 200) from line $1 of its log on.
parts_from() { tail -n +"$1" "$SCRATCH/requests.log" | grep -F "\"PUT $KEY?partNumber=" | grep -F '" 200 ' |
                 sed 's/.*partNumber=\([0-9]*\).*/\1/' | sort -un; }

(cd "$SCRATCH" && exec "$BARGE" run job.yaml) >"$SCRATCH/first.out" 2>&1 &
run=$!
for _ in $(seq 1200); do
  (($(parts_from 1 | wc -l) >= 3)) && break
  kill -0 "$run" 2>/dev/null || break
  sleep 0.05
done
kill -9 "$run" 2>/dev/null
wait "$run" 2>/dev/null
run=""
sleep 1  # a part whose body had arrived is still answered
held_parts=$(parts_from 1)
held=$(echo "$held_parts" | grep -c .)
check "the first controller was killed mid-upload ($held of 12 parts on the server)" test "$held" -ge 3 -a "$held" -lt 12
first=$("$BARGE" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')

out=$("$BARGE" show "$first" 2>&1)
check "show of the killed job names the upload it left" contains "$out" "interrupted (the job's controller ended while it was sent): its multipart upload"

mark=$(($(wc -l <"$SCRATCH/requests.log") + 1))
out=$(cd / && "$BARGE" rerun "$first" 2>&1)
rc=$?
check "rerun succeeds (rc $rc)" test "$rc" = 0
check "rerun sent the file" contains "$out" "sent to s3://: 1 file(s), 0 already there, 0 failed (last: s3://barge-test/resume/rank-0/ckpt/model.bin)"
second=$("$BARGE" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
check "rerun is a new job ($first -> $second)" test "$first" != "$second"
resent=$(parts_from "$mark" | wc -l)
check "rerun sent only the parts the server lacked ($resent = 12 - $held)" test "$resent" -eq $((12 - held))
check "no part the server held was sent again" test -z "$(comm -12 <(echo "$held_parts" | sort) <(parts_from "$mark" | sort))"

out=$("$BARGE" show "$second" 2>&1)
check "show lists the object, its size and MD5" contains "$out" "s3://barge-test/resume/rank-0/ckpt/model.bin  60.0 MiB  $(yes barge-resume-test | head -c $SIZE | md5sum | cut -d' ' -f1)"
check "show says it was resumed" contains "$out" "sent in 12 parts (resumed the upload of job $first: $held of 12 parts were on the server already)"
check "the object holds the file's bytes" python3 - "$PORT" "$S3_KEY" "$S3_SECRET" "$(yes barge-resume-test | head -c $SIZE | md5sum | cut -d' ' -f1)" <<'PY'
import boto3, hashlib, sys
from botocore.config import Config
port, key, secret, md5 = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1", aws_access_key_id=key,
                  aws_secret_access_key=secret, config=Config(s3={"addressing_style": "path"}))
body = s3.get_object(Bucket="barge-test", Key="resume/rank-0/ckpt/model.bin")["Body"].read()
sys.exit(0 if hashlib.md5(body).hexdigest() == md5 else 1)
PY
finish
