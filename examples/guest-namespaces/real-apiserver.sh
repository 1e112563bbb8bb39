#!/usr/bin/env bash
# The namespace provisioner on a real API server, step by step with kubectl,
# each step checked. It starts no API server: give it the kubeconfig of one
# (an admin identity; e.g. ../shared/real-apiserver/run-apiserver.sh start
# writes $KAPI/kubeconfig). It runs the host (target/debug/wasmctrl) with the
# built guest twice (the second time as a restart), on free local ports.
#
#   make guest && cargo build -p wasmctrl
#   examples/guest-namespaces/real-apiserver.sh KUBECONFIG
#
# Checks, each printed PASS or FAIL (the exit status is the number of FAILs):
#   1. three tiered namespaces get their three children, controlled by them;
#   2. a person's edit of a quota is undone, three times, without a write war;
#   3. a change to platform/tier-overrides reaches every namespace of its tier
#      and no other;
#   4. removing the label deletes the three children (the server may have no
#      garbage collector, and the owner still exists anyway: only the host's
#      DELETEs remove them) and leaves the namespace; relabelled, they return;
#   5. an idle host writes nothing over 15 s of 3 s resyncs;
#   6. a restarted host reconciles every namespace and writes nothing;
#   7. ten label flips a second apart end with no write war and all three
#      children;
#   8. the host logged no WARN while starting (streaming-list fallback);
#   9. a label removed while no host runs: the next host deletes the
#      namespace's children.
# Each run uses namespaces of its own (nsp-RUN-*): a server without
# kube-controller-manager never finishes deleting a namespace, so the run
# ends by unlabelling them (the host deletes their children) and deleting
# them (they stay Terminating there, empty and unlabelled).
set -uo pipefail

KUBECONFIG_FILE=${1:?usage: $0 KUBECONFIG}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WASMCTRL=${WASMCTRL:-$ROOT/target/debug/wasmctrl}
GUEST=${GUEST:-$ROOT/target/wasm32-wasip2/guest/guest_namespaces.wasm}
TIER=platform.example.com/tier
RUN=nsp-$(date +%s)
WORK=$(mktemp -d "/tmp/$RUN.XXXX")
K() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }

for f in "$WASMCTRL" "$GUEST"; do
  [[ -e $f ]] || { echo "missing $f: run make guest && cargo build -p wasmctrl"; exit 2; }
done
K get --raw /readyz > /dev/null || { echo "the API server of $KUBECONFIG_FILE is not ready"; exit 2; }
echo "server $(K get --raw /version | python3 -c 'import json, sys; print(json.load(sys.stdin)["gitVersion"])'); run $RUN; logs in $WORK"

FAILS=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
# check WHAT SECONDS COMMAND...: COMMAND succeeds within SECONDS.
check() {
  local what=$1 limit=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= deadline)); then fail "$what (not within ${limit}s)"; return 1; fi
    sleep 0.2
  done
  pass "$what"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

HOST_PID=
# start_host NAME: runs the host in the background, logging to $WORK/NAME.log.
start_host() {
  METRICS=127.0.0.1:$(free_port)
  HEALTH=127.0.0.1:$(free_port)
  "$WASMCTRL" run --guest "$GUEST" --kubeconfig "$KUBECONFIG_FILE" --namespace default \
    --resync-seconds 3 --metrics-addr "$METRICS" --health-addr "$HEALTH" --no-guest-cache \
    > "$WORK/$1.log" 2>&1 &
  HOST_PID=$!
  local deadline=$((SECONDS + 60))
  until curl -fsS "http://$HEALTH/readyz" > /dev/null 2>&1; do
    kill -0 "$HOST_PID" 2> /dev/null || { echo "the host exited, see $WORK/$1.log"; tail -20 "$WORK/$1.log"; exit 1; }
    ((SECONDS < deadline)) || { echo "the host is not ready after 60 s, see $WORK/$1.log"; exit 1; }
    sleep 0.2
  done
}
stop_host() {
  kill -TERM "$HOST_PID" 2> /dev/null && wait "$HOST_PID" 2> /dev/null
  HOST_PID=
}
trap '[[ -n $HOST_PID ]] && kill "$HOST_PID" 2> /dev/null' EXIT

# metric NAME [LABEL...]: the sum of the samples of NAME carrying every LABEL.
metric() {
  local name=$1; shift
  curl -fsS "http://$METRICS/metrics" | awk -v name="$name" -v labels="$*" '
    $1 ~ "^"name"({|$)" { ok = 1; n = split(labels, ls, " "); for (i = 1; i <= n; i++) if (index($1, ls[i]) == 0) ok = 0; if (ok) sum += $2 }
    END { printf "%d\n", sum }'
}
writes() { metric wasmctrl_writes_total 'guest="namespaces"'; }
wars() { metric wasmctrl_write_wars_total 'guest="namespaces"'; }
held_back() { metric wasmctrl_writes_held_back_total 'guest="namespaces"'; }
reconciles() { metric controller_runtime_reconcile_total 'controller="namespaces"'; }
queue_empty() { [[ $(metric workqueue_depth 'name="namespaces"') == 0 ]]; }
war_events() { K get events.events.k8s.io -A -o jsonpath='{range .items[?(@.reason=="WriteWar")]}{.metadata.name}{"\n"}{end}' | grep -c . ; }
no_war() {
  local w h e
  w=$(wars); h=$(held_back); e=$(war_events)
  echo "  write wars $w, writes held back $h, WriteWar events $e"
  [[ $w == 0 && $h == 0 && $e == 0 ]]
}

# children NS: "quota=<spec.hard as JSON> limits=<name> binding=<role>/<group> controlled=<n>"
children() {
  local ns=$1 uid
  uid=$(K get namespace "$ns" -o jsonpath='{.metadata.uid}')
  local q l b
  q=$(K -n "$ns" get resourcequota tier-quota -o json 2> /dev/null)
  l=$(K -n "$ns" get limitrange tier-limits -o json 2> /dev/null)
  b=$(K -n "$ns" get rolebinding tier-edit -o json 2> /dev/null)
  python3 - "$uid" "$ns" "$q" "$l" "$b" << 'EOF'
import json, sys
uid, ns, *docs = sys.argv[1:]
docs = [json.loads(d) if d else None for d in docs]
def controlled(d):
    refs = d["metadata"].get("ownerReferences", [])
    return len(refs) == 1 and refs[0]["kind"] == "Namespace" and refs[0]["name"] == ns \
        and refs[0]["uid"] == uid and refs[0].get("controller") is True
q, l, b = docs
hard = json.dumps(q["spec"]["hard"], sort_keys=True, separators=(",", ":")) if q else "none"
binding = f'{b["roleRef"]["name"]}/{b["subjects"][0]["name"]}' if b else "none"
print(f'quota={hard} limits={"yes" if l else "none"} binding={binding} '
      f'controlled={sum(1 for d in docs if d and controlled(d))}')
EOF
}
hard() { # CPU MEMORY PODS
  printf '{"pods":"%s","requests.cpu":"%s","requests.memory":"%s"}' "$3" "$1" "$2"
}
SMALL=$(hard 2 4Gi 10)
LARGE=$(hard 16 64Gi 100)
has() { [[ $(children "$1") == "quota=$2 limits=yes binding=edit/$1:members controlled=3" ]]; }
has_none() { [[ $(children "$1") == "quota=none limits=none binding=none controlled=0" ]]; }
all_have() { local want=$1; shift; for ns; do has "$ns" "$want" || return 1; done; }
idle_for() { # SECONDS: no write and an empty queue at the end
  local before after
  before=$(writes); sleep "$1"; after=$(writes)
  echo "  writes $before -> $after over $1 s, resyncs in between: $(metric wasmctrl_writes_skipped_total 'guest="namespaces"') writes skipped so far"
  [[ $before == "$after" ]]
}

A=$RUN-a B=$RUN-b C=$RUN-c
K create namespace platform --dry-run=client -o yaml | K apply -f - > /dev/null
K -n platform delete configmap tier-overrides --ignore-not-found > /dev/null
start_host first
for ns in "$A:small" "$B:small" "$C:large"; do
  K create namespace "${ns%%:*}" > /dev/null
  K label namespace "${ns%%:*}" "$TIER=${ns#*:}" > /dev/null
done

# 1. Convergence.
check "1. $A and $B (small) and $C (large) hold their three children, controlled by them" 30 \
  eval 'all_have "$SMALL" "$A" "$B" && has "$C" "$LARGE"'
children "$A"

# 2. A person's edit of the quota, undone each time, without a war.
for i in 1 2 3; do
  K -n "$A" patch resourcequota tier-quota --type merge -p "{\"spec\":{\"hard\":{\"pods\":\"9$i\"}}}" > /dev/null
  check "2.$i the edit pods=9$i of $A's quota is undone" 5 has "$A" "$SMALL"
  sleep 2
done
if no_war; then pass "2. no write war over the edits"; else fail "2. a write war over the edits"; fi

# 3. The shared overrides ConfigMap.
K -n platform create configmap tier-overrides --save-config --from-literal=small='pods=20, cpu=3' > /dev/null
check "3. the small override reaches $A and $B, not $C" 30 \
  eval 'all_have "$(hard 3 4Gi 20)" "$A" "$B" && has "$C" "$LARGE"'
K -n platform create configmap tier-overrides --from-literal=small='pods=30' --from-literal=large='pods=200' \
  --dry-run=client -o yaml | K apply -f - > /dev/null
check "3. a changed override reaches both tiers" 30 \
  eval 'all_have "$(hard 2 4Gi 30)" "$A" "$B" && has "$C" "$(hard 16 64Gi 200)"'
SMALL=$(hard 2 4Gi 30) LARGE=$(hard 16 64Gi 200)

# 4. Label removal.
deletes_before=$(metric wasmctrl_writes_total 'guest="namespaces"' 'verb="delete"')
K label namespace "$A" "$TIER-" > /dev/null
check "4. removing $A's label deletes its three children" 15 has_none "$A"
deletes=$(( $(metric wasmctrl_writes_total 'guest="namespaces"' 'verb="delete"') - deletes_before ))
[[ $deletes == 3 ]] && pass "4. by three DELETEs of the host" || fail "4. $deletes DELETEs of the host, not 3"
[[ $(K get namespace "$A" -o jsonpath='{.status.phase}') == Active ]] && pass "4. $A stays" || fail "4. $A is not Active"
sleep 2
has_none "$A" && has "$B" "$SMALL" && pass "4. nothing comes back; $B keeps its children" || fail "4. $A: $(children "$A"); $B: $(children "$B")"
K label namespace "$A" "$TIER=small" > /dev/null
check "4. relabelled, $A gets its children back" 15 has "$A" "$SMALL"

# 5. Idle.
check "5. the queue drains" 30 queue_empty
if idle_for 15; then pass "5. no write in 15 idle seconds (resync every 3 s)"; else fail "5. writes while idle"; fi

# 6. Restart.
stop_host
start_host second
check "6. the new host reconciled every namespace" 30 eval '(( $(reconciles) >= 3 )) && queue_empty'
sleep 2
w=$(writes)
[[ $w == 0 ]] && pass "6. the restarted host wrote nothing (skipped $(metric wasmctrl_writes_skipped_total 'guest="namespaces"'))" \
  || fail "6. the restarted host wrote $w times"

# 7. Ten label flips a second apart.
for flip in $(seq 1 10); do
  K label namespace "$B" "$TIER-" > /dev/null; sleep 1
  K label namespace "$B" "$TIER=small" > /dev/null; sleep 1
  echo "  flip $flip: $(children "$B")"
done
check "7. after ten flips $B holds its three children" 30 has "$B" "$SMALL"
if no_war; then pass "7. no write war over the flips"; else fail "7. a write war over the flips"; fi

# 8. Start-up warnings (the log's colours stripped).
plain() { sed 's/\x1b\[[0-9;]*m//g' "$WORK/first.log" "$WORK/second.log"; }
warns=$(plain | grep -c ' WARN ')
if [[ $warns == 0 ]]; then
  pass "8. no WARN in either host's log ($(plain | grep -c ' INFO ') INFO lines)"
else
  fail "8. $warns WARN lines in the hosts' logs, such as:"
  plain | grep ' WARN ' | sed 's/^[^ ]* *//' | sort | uniq -c | sort -rn | head -3
fi

# 9. A label removed while no host runs: the next host never saw it go.
stop_host
K label namespace "$C" "$TIER-" > /dev/null
start_host third
check "9. a label removed while no host ran: the next host deletes $C's children" 30 has_none "$C"
check "9. $A and $B keep theirs" 10 all_have "$SMALL" "$A" "$B"

# Clean up: the host deletes the children of unlabelled namespaces.
for ns in "$A" "$B" "$C"; do K label namespace "$ns" "$TIER-" > /dev/null; done
check "cleanup: every child of this run is deleted" 30 eval 'has_none "$A" && has_none "$B" && has_none "$C"'
stop_host
K -n platform delete configmap tier-overrides > /dev/null
K delete namespace "$A" "$B" "$C" --wait=false > /dev/null
echo "$FAILS check(s) failed"
exit "$FAILS"
