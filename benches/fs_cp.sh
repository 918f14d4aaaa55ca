#!/usr/bin/env bash
# Fixed-workload benchmark of `exo fs cp`, side by side in the same run
# with `kubectl cp` against the same pod and the same volume:
#
#  - one 100 MiB file (random bytes) and a folder of 1000 files of 4 KiB,
#    each into the volume and out of it;
#  - exo on both routes: direct (kubeconfig) and through the control plane
#    (`--deployment`: CLI -> control plane -> the operator's upstream
#    WebSocket -> exec);
#  - the floor: the exec pipe alone (`kubectl exec -i ... cat`), what any
#    copy over the pod's exec costs at least.
#
# The pod is exo's helper pod for the volume (no agent mounts it). kwok runs
# a pod's exec on this host, so kubectl cp is given the folder the volume
# shows through that pod ($EXO_TEST_POD_ROOT/<ns>/<pod>/<mount>): the same
# exec, the same tar, the same files. exo checks sha256 end to end and
# stages before renaming; kubectl cp checks nothing.
#
# Needs the test environment (`scripts/testenv up`). RUNS (default 5) per
# command; hyperfine's JSON goes to $OUT (default target/bench).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
OUT=${OUT:-$repo/target/bench}
RUNS=${RUNS:-5}
mkdir -p "$OUT"
step() { printf '== %s (%s)\n' "$*" "$(date +%H:%M:%S)" >&2; }

step "release build"
cargo build --release --quiet --bin exo
EXO=${CARGO_TARGET_DIR:-$repo/target}/release/exo
work=$(mktemp -d)
ns=bench-fs-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

step "namespace $ns, control plane, operator"
"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl create namespace "$ns" >/dev/null
"$EXO" control-plane --db "$work/cp.db" serve --listen 127.0.0.1:0 > "$work/cp.out" 2> "$work/cp.log" &
pids+=($!)
for _ in $(seq 100); do grep -q 'listening on ' "$work/cp.out" && break; sleep 0.1; done
base=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$work/cp.out" | head -1)
[ -n "$base" ] || { echo "the control plane did not start: $(cat "$work/cp.log")" >&2; exit 1; }
token=$("$EXO" control-plane --db "$work/cp.db" deployment create bench)
AUTONOMIC_MANAGED=true AUTONOMIC_BASE_URL=$base AUTONOMIC_AUTH_TOKEN=$token \
EXO_UPSTREAM_HEALTH_ADDR=127.0.0.1:$(free_port) RUST_LOG=warn \
  "$EXO" operator run --namespace "$ns" --lease-namespace "$ns" --identity bench \
  --metrics-addr 127.0.0.1:0 --fs-helper-idle 30m > "$work/operator.log" 2>&1 &
pids+=($!)
export EXO_CONTROL_PLANE=$base

step "AgentFS data (4Gi) and its helper pod"
"$EXO" fs create data --size 4Gi --max-size 8Gi -n "$ns" >/dev/null
for _ in $(seq 300); do
  "$EXO" fs list -n "$ns" -o json | python3 -c 'import json,sys; i=json.load(sys.stdin)["items"]; sys.exit(0 if i and i[0].get("provisioned") else 1)' && break
  sleep 0.2
done
pod=$("$EXO" fs ls data:/ -n "$ns" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pod"])')
read -r container mount < <(kubectl get pod -n "$ns" "$pod" -o json | python3 -c '
import json, sys
p = json.load(sys.stdin)
vol = next(v["name"] for v in p["spec"]["volumes"] if "persistentVolumeClaim" in v)
for c in p["spec"]["containers"]:
    for m in c.get("volumeMounts", []):
        if m["name"] == vol:
            print(c["name"], m["mountPath"]); sys.exit(0)
sys.exit("no container mounts the claim")')
vol=$EXO_TEST_POD_ROOT/$ns/$pod$mount
[ -d "$vol" ] || { echo "the volume is not at $vol" >&2; exit 1; }
# The control-plane route must be up before anything is timed.
for _ in $(seq 100); do "$EXO" fs list -n "$ns" --deployment bench >/dev/null 2>&1 && break; sleep 0.2; done
echo "pod $pod, container $container, mount $mount -> $vol" >&2

step "workloads"
python3 - "$work/src" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(20261201)
os.makedirs(f"{root}/small", exist_ok=True)
with open(f"{root}/big.bin", "wb") as f:
    for _ in range(100):
        f.write(rng.randbytes(1 << 20))
for i in range(1000):
    with open(f"{root}/small/f{i:04d}", "wb") as f:
        f.write(rng.randbytes(4096))
PY
mkdir -p "$vol/src" "$work/down"
cp "$work/src/big.bin" "$vol/src/big.bin"
cp -r "$work/src/small" "$vol/src/small"
mkdir -p "$vol/up"

fs=("$EXO" fs -n "$ns")
kc=(kubectl cp -n "$ns" -c "$container")
hf() {
  local name=$1; shift
  step "$name"
  hyperfine --style basic --runs "$RUNS" --warmup 1 --export-json "$OUT/fs-$name.json" "$@"
}

# Into the volume. Each run starts from an empty target.
hf up-big \
  --prepare "rm -rf '$vol/up/big.bin'" \
  -n "exo direct" "${fs[*]} cp $work/src/big.bin data:/up/big.bin" \
  -n "exo control plane" "${fs[*]} --deployment bench cp $work/src/big.bin data:/up/big.bin" \
  -n "kubectl cp" "${kc[*]} $work/src/big.bin $pod:$vol/up/big.bin" \
  -n "floor: kubectl exec -i cat" "kubectl exec -i -n $ns -c $container $pod -- sh -c 'cat > $vol/up/big.bin' < $work/src/big.bin"
hf up-small \
  --prepare "rm -rf '$vol/up/small'" \
  -n "exo direct" "${fs[*]} cp $work/src/small data:/up/small" \
  -n "exo control plane" "${fs[*]} --deployment bench cp $work/src/small data:/up/small" \
  -n "kubectl cp" "${kc[*]} $work/src/small $pod:$vol/up/small" \
  -n "floor: kubectl exec -i tar" "tar -C $work/src -cf - small | kubectl exec -i -n $ns -c $container $pod -- tar -xf - -C $vol/up"

# Out of it. Each run starts without the local copy.
hf down-big \
  --prepare "rm -rf '$work/down/big.bin'" \
  -n "exo direct" "${fs[*]} cp data:/src/big.bin $work/down/big.bin" \
  -n "exo control plane" "${fs[*]} --deployment bench cp data:/src/big.bin $work/down/big.bin" \
  -n "kubectl cp" "${kc[*]} $pod:$vol/src/big.bin $work/down/big.bin" \
  -n "floor: kubectl exec cat" "kubectl exec -n $ns -c $container $pod -- cat $vol/src/big.bin > $work/down/big.bin"
hf down-small \
  --prepare "rm -rf '$work/down/small'" \
  -n "exo direct" "${fs[*]} cp data:/src/small $work/down/small" \
  -n "exo control plane" "${fs[*]} --deployment bench cp data:/src/small $work/down/small" \
  -n "kubectl cp" "${kc[*]} $pod:$vol/src/small $work/down/small" \
  -n "floor: kubectl exec tar" "kubectl exec -n $ns -c $container $pod -- tar -cf - -C $vol/src small | tar -xf - -C $work/down"

# What landed is what was sent (the last run of each).
cmp "$work/src/big.bin" "$vol/up/big.bin"
cmp "$work/src/big.bin" "$work/down/big.bin"
diff -r "$work/src/small" "$vol/up/small"
diff -r "$work/src/small" "$work/down/small"

step "medians (s) and ratios"
python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
print("| workload | exo direct | exo control plane | kubectl cp | floor | direct / kubectl | plane / kubectl | exo direct / floor |")
print("|---|---|---|---|---|---|---|---|")
for w in ["up-big", "up-small", "down-big", "down-small"]:
    r = json.load(open(f"{out}/fs-{w}.json"))["results"]
    m = [statistics.median(x["times"]) for x in r]
    print(f"| {w} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.2f} | **{m[0]/m[2]:.2f}** | **{m[1]/m[2]:.2f}** | {m[0]/m[3]:.2f} |")
PY
