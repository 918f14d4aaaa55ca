#!/usr/bin/env bash
# Fixed-workload benchmark: the memory of streaming 10,000 objects
# upstream. One namespace of W (default 10000) disabled Tools (a status,
# no children), a real `exo control-plane serve`, and three ways to run
# the operator over them, each RUNS (default 3) times, in the same run:
#
#  - `operator run`, unmanaged, over an empty namespace: the process
#    itself, with nothing to cache (the empty floor);
#  - `operator run`, unmanaged: the caches alone (the floor: what watching
#    the objects costs at least);
#  - `operator run`, managed: the upstream connection streams the
#    operator's own caches (one watch per kind per process);
#  - `operator run` unmanaged beside `operator connect`: the same work
#    with a second set of watches, as `operator run` did before the
#    upstream read its caches (RSS of both processes summed).
#
# Each is measured once it is ready and, when it streams, once the control
# plane shows all W Tools: VmRSS then, and the peak (VmHWM). Medians.
# Needs the test environment (`scripts/testenv up`). `EXO=path` measures an
# exo binary built before (another checkout's, say) instead of building.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
RUNS=${RUNS:-3}
W=${W:-10000}
step() { printf '== %s (%s)\n' "$*" "$(date +%H:%M:%S)" >&2; }

# PROFILE=dev measures the debug build (same heap, a bigger text mapping).
# EXO=path measures that binary, already built, and builds nothing.
if [ -n "${EXO:-}" ]; then
  EXO=$(realpath "$EXO")
  [ -x "$EXO" ] || { echo "EXO=$EXO is not an executable" >&2; exit 2; }
  step "measuring $EXO"
else
  PROFILE=${PROFILE:-release}
  step "$PROFILE build"
  cargo build --profile "$PROFILE" --quiet --bin exo
  dir=$PROFILE; [ "$PROFILE" = dev ] && dir=debug
  EXO=${CARGO_TARGET_DIR:-$repo/target}/$dir/exo
fi
work=$(mktemp -d)
ns=bench-rss-$$
empty_ns=$ns-empty
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  kubectl delete namespace "$ns" "$empty_ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step "$W disabled Tools in $ns"
"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl create namespace "$ns" >/dev/null
kubectl create namespace "$empty_ns" >/dev/null
python3 - "$ns" "$W" "$work/tools.json" <<'PY'
import json, sys
ns, w, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
img = "127.0.0.1:25000/exo/tool@sha256:" + "c" * 64
items = [{"apiVersion": "autonomic.sh/v1alpha1", "kind": "Tool",
          "metadata": {"name": f"t{i}", "namespace": ns},
          "spec": {"container": {"image": img}, "enabled": False}} for i in range(w)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(out, "w"))
PY
kubectl create -f "$work/tools.json" >/dev/null

step "control plane"
"$EXO" control-plane --db "$work/cp.sqlite" serve --listen 127.0.0.1:0 >"$work/cp.out" 2>"$work/cp.log" &
pids+=($!)
cp_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/cp.out" && break; sleep 0.1; done
base=$(sed -n 's/^listening on //p' "$work/cp.out")
token=$("$EXO" control-plane --db "$work/cp.sqlite" deployment create rss)

kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # addr
  for _ in $(seq 1200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$1/readyz")" = 200 ] && return 0
    sleep 0.1
  done
  echo "operator not ready" >&2; return 1
}
wait_tools() { # the control plane shows all W Tools
  for _ in $(seq 1200); do
    n=$(curl -s "$base/api/v1/deployments/rss/resources" | jq '[.resources[]? | select(.kind == "Tool")] | length')
    [ "${n:-0}" -ge "$W" ] && return 0
    sleep 0.25
  done
  echo "the control plane never showed $W Tools (last: $n)" >&2; return 1
}
start_run() { # managed? [namespace] -> pid; metrics addr in $addr
  local run_ns=${2:-$ns}
  addr=127.0.0.1:$(free_port)
  local env=(env -u AUTONOMIC_MANAGED)
  [ "$1" = managed ] && env=(env AUTONOMIC_MANAGED=true AUTONOMIC_BASE_URL="$base" AUTONOMIC_AUTH_TOKEN="$token")
  "${env[@]}" EXO_UPSTREAM_HEALTH_ADDR=127.0.0.1:$(free_port) RUST_LOG=warn \
    "$EXO" operator run -n "$run_ns" --lease-namespace "$run_ns" --identity "rss-$$" \
    --metrics-addr "$addr" --lease-duration 3 >>"$work/op.log" 2>&1 &
  pids+=($!)
  run_pid=$!
}

declare -A rss hwm
measure() { # label pids...
  local label=$1; shift
  local r=0 h=0
  for p in "$@"; do r=$((r + $(kb "$p" VmRSS))); h=$((h + $(kb "$p" VmHWM))); done
  rss[$label]+="$r "; hwm[$label]+="$h "
  printf '   %-22s RSS %6.1f MiB, peak %6.1f MiB\n' "$label" "$(bc -l <<<"$r/1024")" "$(bc -l <<<"$h/1024")" >&2
}
restart_cp() {
  # A fresh view per run: the control plane forgets the last run's resources.
  kill "$cp_pid"; wait "$cp_pid" 2>/dev/null || true
  "$EXO" control-plane --db "$work/cp.sqlite" serve --listen "${base#http://}" >"$work/cp.out" 2>>"$work/cp.log" &
  cp_pid=$!
  pids=("$cp_pid")
  for _ in $(seq 100); do grep -q "listening on" "$work/cp.out" && break; sleep 0.1; done
}

for run in $(seq 1 "$RUNS"); do
  step "run $run of $RUNS: empty (no objects)"
  start_run unmanaged "$empty_ns"; wait_ready "$addr"; sleep 3
  measure empty "$run_pid"
  kill "$run_pid"; wait "$run_pid" 2>/dev/null || true; pids=("$cp_pid")

  step "run $run of $RUNS: unmanaged"
  start_run unmanaged; wait_ready "$addr"; sleep 3
  measure unmanaged "$run_pid"
  kill "$run_pid"; wait "$run_pid" 2>/dev/null || true; pids=("$cp_pid")

  step "run $run of $RUNS: managed (one watch per kind)"
  restart_cp
  start_run managed; wait_ready "$addr"; wait_tools; sleep 3
  measure managed "$run_pid"
  kill "$run_pid"; wait "$run_pid" 2>/dev/null || true; pids=("$cp_pid")

  step "run $run of $RUNS: unmanaged + operator connect (two watches per kind)"
  restart_cp
  start_run unmanaged; wait_ready "$addr"
  KUBECONFIG=$KUBECONFIG AUTONOMIC_MANAGED=true AUTONOMIC_BASE_URL="$base" AUTONOMIC_AUTH_TOKEN="$token" RUST_LOG=warn \
    "$EXO" operator connect -n "$ns" >>"$work/connect.log" 2>&1 &
  pids+=($!)
  conn_pid=$!
  wait_tools; sleep 3
  measure "run+connect" "$run_pid" "$conn_pid"
  kill "$run_pid" "$conn_pid"; wait "$run_pid" "$conn_pid" 2>/dev/null || true; pids=("$cp_pid")
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mib() { bc -l <<<"$1/1024" | xargs printf '%.1f'; }
floor=$(median "${rss[unmanaged]}")
echo
echo "| $W watched Tools ($RUNS runs, medians) | RSS | peak | RSS / unmanaged |"
echo "| --- | --- | --- | --- |"
for l in empty unmanaged managed "run+connect"; do
  r=$(median "${rss[$l]}"); h=$(median "${hwm[$l]}")
  printf '| %s | %s MiB | %s MiB | %.2f |\n' "$l" "$(mib "$r")" "$(mib "$h")" "$(bc -l <<<"$r/$floor")"
done
