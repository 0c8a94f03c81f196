#!/usr/bin/env bash
# `barge schema`, checked with a real validator (Debian's
# python3-jsonschema, under /usr/bin/python3, not whatever python3 comes
# first on PATH): every sample validates; every bad-job corpus file whose
# fault is a key or a type fails; the schema is never stricter than barge
# (`port: "22"`, an empty block).
# Usage: schema_test.sh PATH_TO_BARGE
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
if ! "$PY" -c 'import jsonschema, yaml' 2>/dev/null; then
  echo "FAIL: $PY cannot import jsonschema and yaml (apt-get install python3-jsonschema python3-yaml; scripts/test.sh installs them)" >&2
  exit 1
fi
"$BARGE" schema >"$SCRATCH/schema.json"
check "barge schema is a valid draft 2020-12 schema" "$PY" -c '
import json, sys, jsonschema
jsonschema.Draft202012Validator.check_schema(json.load(open(sys.argv[1])))' "$SCRATCH/schema.json"

# validate FILE: exit 0 when FILE validates; the first error on stderr.
# YAML is read with the 1.2 core schema (only true/false are booleans), as
# yaml-cpp and editors read it.
cat >"$SCRATCH/validate.py" <<'PY'
import json, re, sys, yaml, jsonschema
class Core(yaml.SafeLoader):
    pass
Core.yaml_implicit_resolvers = {k: [r for r in v if r[0] != "tag:yaml.org,2002:bool"]
                                for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Core.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                           list("tTfF"))
schema = json.load(open(sys.argv[1]))
doc = yaml.load(open(sys.argv[2], encoding="utf-8"), Loader=Core)
errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
for e in errors[:1]:
    print("  %s: %s" % ("/".join(map(str, e.path)), e.message[:200]), file=sys.stderr)
sys.exit(1 if errors else 0)
PY
validate() { "$PY" "$SCRATCH/validate.py" "$SCRATCH/schema.json" "$1"; }

for f in "$SRC"/samples/*.yaml; do
  check "sample $(basename "$f") validates" validate "$f"
done
# The corpus files whose fault is an unknown or misplaced key, a missing
# required key, a wrong type or a value outside a fixed choice.
for name in 01-unknown-key-suggestion 02-unknown-container-key 03-unknown-key-no-suggestion \
  04-wrong-type-hosts 05-wrong-type-cap-add 06-wrong-type-port 16-unknown-role \
  41-bad-host-key-checking 42-bad-image-pull 43-bad-rendezvous-convention 45-missing-name \
  50-count-on-head 61-bad-on-worker-exit 70-ready-on-worker 73-host-without-address \
  75-top-level-list; do
  f=$SRC/tests/bad_jobs/$name.yaml
  if [[ ! -f "$f" ]]; then fail "corpus file $name.yaml is missing"; continue; fi
  if validate "$f" 2>"$SCRATCH/why"; then
    fail "corpus $name.yaml validates, but its fault is a key or type error"
  else
    ok "corpus $name.yaml fails: $(head -n 1 "$SCRATCH/why" | sed 's/^ *//')"
  fi
done

# Never stricter than barge: what barge accepts, the schema accepts.
cat >"$SCRATCH/lenient.yaml" <<'YAML'
name: 7
image: busybox
container:
hosts:
  - address: h1
    port: "22"
    nodes: "2"
  - h2
ssh:
  port: 22
secrets:
restart:
  max_restarts: 1
  on: [host_lost]
roles:
  worker:
    count: rest
YAML
check "barge itself accepts the lenient file" "$BARGE" plan "$SCRATCH/lenient.yaml" >/dev/null 2>&1
check "the schema accepts it too (port: \"22\", name: 7, empty blocks)" validate "$SCRATCH/lenient.yaml"
finish
