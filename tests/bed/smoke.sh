#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2016  # `ok` never fails; remote commands are quoted on purpose
# Checks that the test bed described by $BARGE_BED_DIR/bed.env really works,
# through the plain OpenSSH client: what barge's own bed tests take for granted.
# Run by ctest as bed_smoke (needs the "bed" fixture); also by hand.
set -euo pipefail

BED=${BARGE_BED_DIR:-/tmp/barge-bed}
env_file="$BED/bed.env"
[[ -r "$env_file" ]] || { echo "smoke: no $env_file: the bed is down (tests/bed/bed.sh up)" >&2; exit 1; }
# shellcheck disable=SC1090
source "$env_file"

fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*" >&2; fails=$((fails + 1)); }
ssh_opts=(-i "$BED_SSH_KEY" -o "UserKnownHostsFile=$BED_KNOWN_HOSTS" -o StrictHostKeyChecking=yes
  -o GlobalKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR -F /dev/null)
on() { # on ADDR PORT CMD
  local addr=$1 port=$2
  shift 2
  ssh "${ssh_opts[@]}" -p "$port" "$BED_SSH_USER@$addr" "$@"
}
img=$BED_IMAGE

# Loopback host: the machine's default engine, no ~/.bashrc in remote commands.
out=$(on "$BED_SSH_ADDR" "$BED_SSH_PORT" "docker run --rm $img sh -c 'echo hi'" 2>&1) || true
[[ "$out" == hi ]] && ok "lo: docker run over ssh" || bad "lo: docker run over ssh printed '$out'"
out=$(on "$BED_SSH_ADDR" "$BED_SSH_PORT" 'echo "$PATH"; ls -A ~' 2>&1) || true
[[ "$out" != *pyenv* && "$out" != *.bashrc* ]] && ok "lo: no ~/.bashrc, PATH=$(head -n1 <<<"$out")" || bad "lo: root's home leaks in: $out"

# An unknown host key is refused (known_hosts is really checked).
if ssh -i "$BED_SSH_KEY" -o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/dev/null \
  -o StrictHostKeyChecking=yes -o BatchMode=yes -F /dev/null -p "$BED_SSH_PORT" \
  "$BED_SSH_USER@$BED_SSH_ADDR" true 2>/dev/null; then
  bad "lo: an empty known_hosts was accepted"
else
  ok "lo: unknown host key refused"
fi

# Namespace hosts: own hostname, own address inside --network host containers,
# own DOCKER_HOST, private /tmp.
read -r -a hosts <<<"${BED_HOSTS:-}"
for h in "${hosts[@]}"; do
  addr_var="BED_HOST_${h}_ADDR"
  addr=${!addr_var}
  if [[ "${BED_DOCKERD:-1}" == 1 ]]; then
    out=$(on "$addr" 22 "hostname; docker run --rm --network host $img ip -4 -o addr show eth0" 2>&1) || true
    if [[ "$(head -n1 <<<"$out")" == "$h" && "$out" == *"inet $addr/"* ]]; then
      ok "$h: hostname $h, host-network container has $addr"
    else
      bad "$h: got: $out"
    fi
  else
    out=$(on "$addr" 22 hostname 2>&1) || true
    [[ "$out" == "$h" ]] && ok "$h: hostname" || bad "$h: hostname printed '$out'"
  fi
done
if ((${#hosts[@]} >= 2)); then
  a=${hosts[0]} b=${hosts[-1]}
  addr_a_var="BED_HOST_${a}_ADDR" addr_b_var="BED_HOST_${b}_ADDR"
  addr_a=${!addr_a_var} addr_b=${!addr_b_var}
  on "$addr_a" 22 'echo smoke >/tmp/bb-smoke'
  out=$(on "$addr_b" 22 'cat /tmp/bb-smoke 2>/dev/null || echo absent')
  on "$addr_a" 22 'rm -f /tmp/bb-smoke'
  [[ "$out" == absent ]] && ok "$a/$b: private /tmp" || bad "$a/$b: /tmp is shared"

  if [[ "${BED_DOCKERD:-1}" == 1 ]]; then
    # A listener in a container on one host, a client in a container on another.
    on "$addr_b" 22 "docker run -d --name bb-smoke-listen --network host $img sh -c 'nc -l -p 5999'" >/dev/null
    out=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      if on "$addr_a" 22 "echo from-$a | docker run -i --rm --network host $img nc -w 2 $addr_b 5999" 2>/dev/null; then
        out=$(on "$addr_b" 22 "docker wait bb-smoke-listen >/dev/null; docker logs bb-smoke-listen" 2>&1)
        break
      fi
      sleep 0.3
    done
    on "$addr_b" 22 'docker rm -f bb-smoke-listen' >/dev/null 2>&1 || true
    [[ "$out" == "from-$a" ]] && ok "$a -> $b: container to container over the bridge" || bad "$a -> $b: got '$out'"
  fi
fi

# The torch image, when the bed carries it: a gloo all_reduce across hosts.
if [[ -n "${BED_TORCH_IMAGE:-}" ]] && ((${#hosts[@]} >= 2)); then
  n=${#hosts[@]}
  ((n > 3)) && n=3
  master_var="BED_HOST_${hosts[0]}_ADDR"
  master=${!master_var}
  script='import torch, torch.distributed as d
d.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(d.get_rank())]); d.all_reduce(t)
print(int(t.item()))'
  pids=()
  for ((r = 0; r < n; r++)); do
    v="BED_HOST_${hosts[$r]}_ADDR"
    on "${!v}" 22 "docker run --rm --network host -e MASTER_ADDR=$master -e MASTER_PORT=29555 -e RANK=$r -e WORLD_SIZE=$n $BED_TORCH_IMAGE python3 -c '$script'" >"$BED/smoke-torch-$r.out" 2>&1 &
    pids+=($!)
  done
  want=$((n * (n - 1) / 2))
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}" || true
    got=$(tail -n1 "$BED/smoke-torch-$r.out")
    [[ "$got" == "$want" ]] && ok "torch rank $r on ${hosts[$r]}: all_reduce = $want" || bad "torch rank $r: $(cat "$BED/smoke-torch-$r.out")"
    rm -f "$BED/smoke-torch-$r.out"
  done
fi

# Nothing left behind. A host's failure record (runner/remote/host_record.h)
# is not a leftover: barge keeps it there for every user of the host. Its
# entries, and only they, are created and never started, named
# barge-fault-* and labelled barge.fault; any other container, one only
# named like an entry included, is left behind.
for h in "${hosts[@]}"; do
  [[ "${BED_DOCKERD:-1}" == 1 ]] || break
  v="BED_HOST_${h}_ADDR"
  if ! listed=$(on "${!v}" 22 "docker ps -a --format '{{.Names}} {{.State}} {{.Label \"barge.fault\"}}'" 2>&1); then
    bad "$h: cannot list its containers: $listed"
    continue
  fi
  left=$(grep -Ev '^barge-fault-[^ ]+ created [^ ]+$' <<<"$listed" | sed '/^$/d' | cut -d' ' -f1 | tr '\n' ' ' || true)
  [[ -z "$left" ]] || bad "$h: $(wc -w <<<"$left") containers left: $left"
done

if ((fails)); then
  echo "smoke: $fails check(s) failed" >&2
  exit 1
fi
echo "smoke: the bed works"
