#!/usr/bin/env bash
# Fixed-workload benchmark of AgentFS backups through the operator, side by
# side in the same run with the floors a user would compare them with:
#
#  - workloads, each 1 GiB of random bytes in one volume: one large file
#    (`big`), and 10,000 files of 100 KiB in 100 folders (`small`);
#  - backup: `exo fs backup` (the operator reads the volume through the
#    exec tar path, cuts it into chunks, sends them to the test registry)
#    into a new repository each run (every chunk sent), then again with
#    nothing changed, then after 1 % of the content changed (10 MiB in one
#    place of the large file; one folder of 100 files of the small ones);
#  - restore: `exo fs restore --to NEW` (a new AgentFS, every chunk, file
#    and the tree hash checked, the pod's own hash compared);
#  - floors: `exo fs cp` of the same data out of the volume and into a new
#    one (the same exec tar path, with its own sha256 end to end), and
#    `tar -c | sha256sum` of the folder on this host (reading and hashing
#    the bytes once, no exec, no network).
#
# kwok runs a pod's exec on this host, so all of it shares the 2 cores with
# the apiserver, the operator, the registry and the CLI.
#
# Needs the test environment (`scripts/testenv up`). RUNS (default 3) per
# step; EXO_BIN (default: a release build). Results: a Markdown table on
# stdout, the raw times in $OUT (default target/bench).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
OUT=${OUT:-$repo/target/bench}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
step() { printf '== %s (%s)\n' "$*" "$(date +%H:%M:%S)" >&2; }

if [ -z "${EXO_BIN:-}" ]; then
  step "release build"
  cargo build --release --quiet --bin exo
  EXO_BIN=${CARGO_TARGET_DIR:-$repo/target}/release/exo
fi
EXO=$EXO_BIN
work=$(mktemp -d)
ns=bench-backup-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fs=("$EXO" fs -n "$ns")

step "namespace $ns, operator"
"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl create namespace "$ns" >/dev/null
RUST_LOG=info "$EXO" operator run --namespace "$ns" --lease-namespace "$ns" --identity bench \
  --metrics-addr 127.0.0.1:0 --fs-helper-idle 30m --log-format json > "$work/operator.log" 2>&1 &
pids+=($!)

# The volume's folder on this host, through the pod that mounts it.
folder() {
  local name=$1 pod
  pod=$("${fs[@]}" ls "$name:/" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pod"])')
  kubectl get pod -n "$ns" "$pod" -o json | python3 -c '
import json, sys
p = json.load(sys.stdin)
vol = next(v["name"] for v in p["spec"]["volumes"] if "persistentVolumeClaim" in v)
for c in p["spec"]["containers"]:
    for m in c.get("volumeMounts", []):
        if m["name"] == vol:
            print(sys.argv[1] + "/" + sys.argv[2] + "/" + p["metadata"]["name"] + m["mountPath"]); sys.exit(0)
sys.exit("no container mounts the claim")' "$EXO_TEST_POD_ROOT" "$ns"
}
provisioned() {
  for _ in $(seq 600); do
    "${fs[@]}" list -o json | python3 -c 'import json,sys
n = sys.argv[1]
i = [x for x in json.load(sys.stdin)["items"] if x["name"] == n]
sys.exit(0 if i and i[0].get("provisioned") else 1)' "$1" && return 0
    sleep 0.2
  done
  echo "$1 was not provisioned" >&2; return 1
}
now() { date +%s.%N; }
record() { echo "$1 $2 $3" >> "$OUT/backup-times.txt"; }  # workload step seconds
: > "$OUT/backup-times.txt"
: > "$OUT/backup-sent.txt"
repo_path() { echo "$EXO_TEST_REGISTRY/exo-bench/backup-$$-$1"; }
policy() {  # the volume `data` backs up to repository $1
  kubectl patch agentfs data -n "$ns" --type merge -p \
    "{\"spec\":{\"backup\":{\"every\":\"24h\",\"keep\":50,\"repository\":\"$1\",\"insecure\":true}}}" >/dev/null
}
backup() {  # workload step: one `exo fs backup`, timed; what it sent
  local t0 t1 out
  t0=$(now)
  out=$("${fs[@]}" backup data -o json)
  t1=$(now)
  record "$1" "$2" "$(echo "$t1 - $t0" | bc)"
  echo "$out" | python3 -c 'import json,sys
b = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], b.get("bytesUploaded"), b.get("bytesTotal"))' "$1" "$2" >> "$OUT/backup-sent.txt"
}

step "the workloads (1 GiB each)"
python3 - "$work/src" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(20261206)
os.makedirs(f"{root}/big", exist_ok=True)
with open(f"{root}/big/big.bin", "wb") as f:
    for _ in range(1024):
        f.write(rng.randbytes(1 << 20))
for d in range(100):
    os.makedirs(f"{root}/small/d{d:02d}", exist_ok=True)
    for i in range(100):
        with open(f"{root}/small/d{d:02d}/f{i:02d}", "wb") as f:
            f.write(rng.randbytes(100 << 10))
PY

for w in big small; do
  step "$w: volume data"
  "${fs[@]}" delete data >/dev/null 2>&1 || true
  for _ in $(seq 300); do kubectl get agentfs data -n "$ns" >/dev/null 2>&1 || break; sleep 0.2; done
  "${fs[@]}" create data --size 4Gi --max-size 8Gi >/dev/null
  provisioned data
  vol=$(folder data)
  cp -r "$work/src/$w" "$vol/w"

  for run in $(seq "$RUNS"); do
    step "$w run $run: floors"
    rm -rf "$work/down"; mkdir -p "$work/down"
    t0=$(now); "${fs[@]}" cp data:/w "$work/down/out" >/dev/null; t1=$(now)
    record "$w" "floor-cp-out" "$(echo "$t1 - $t0" | bc)"
    t0=$(now); tar -C "$vol" -cf - w | sha256sum >/dev/null; t1=$(now)
    record "$w" "floor-tar-sha256sum" "$(echo "$t1 - $t0" | bc)"

    step "$w run $run: backups"
    policy "$(repo_path "$w-$run")"
    backup "$w" "backup-first"
    backup "$w" "backup-unchanged"
    if [ "$w" = big ]; then
      python3 - "$vol/w/big.bin" "$run" <<'PY'
import random, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(300 << 20)
    f.write(random.Random(int(sys.argv[2])).randbytes(10 << 20))
PY
    else
      python3 - "$vol/w/d42" "$run" <<'PY'
import os, random, sys
rng = random.Random(int(sys.argv[2]))
for n in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], n), "wb") as f:
        f.write(rng.randbytes(100 << 10))
PY
    fi
    backup "$w" "backup-1pct-changed"

    step "$w run $run: restore, and the copy into a new volume"
    t0=$(now); "${fs[@]}" restore data --from latest --to "r$run" >/dev/null; t1=$(now)
    record "$w" "restore" "$(echo "$t1 - $t0" | bc)"
    "${fs[@]}" create "c$run" --size 4Gi --max-size 8Gi >/dev/null
    provisioned "c$run"
    t0=$(now); "${fs[@]}" cp "$work/down/out" "c$run:/out" >/dev/null; t1=$(now)
    record "$w" "floor-cp-in" "$(echo "$t1 - $t0" | bc)"
    "${fs[@]}" delete "r$run" >/dev/null
    "${fs[@]}" delete "c$run" >/dev/null
  done
done

step "medians (s) and ratios"
python3 - "$OUT" <<'PY'
import statistics, sys
out = sys.argv[1]
t = {}
for line in open(f"{out}/backup-times.txt"):
    w, s, v = line.split()
    t.setdefault((w, s), []).append(float(v))
sent = {}
for line in open(f"{out}/backup-sent.txt"):
    w, s, up, total = line.split()
    sent.setdefault((w, s), []).append(int(up) / int(total))
m = {k: statistics.median(v) for k, v in t.items()}
print("| workload | step | median (s) | runs | MiB/s | sent | / exo fs cp | / tar \\| sha256sum |")
print("|---|---|---:|---|---:|---:|---:|---:|")
for w in ["big", "small"]:
    for s in ["floor-tar-sha256sum", "floor-cp-out", "backup-first", "backup-unchanged",
              "backup-1pct-changed", "floor-cp-in", "restore"]:
        if (w, s) not in m:
            continue
        cp = m[(w, "floor-cp-in" if s == "restore" else "floor-cp-out")]
        share = sent.get((w, s))
        print(f"| {w} | {s} | {m[(w, s)]:.2f} | {', '.join(f'{x:.2f}' for x in t[(w, s)])} "
              f"| {1024 / m[(w, s)]:.0f} | {'' if share is None else f'{100 * statistics.median(share):.2f} %'} "
              f"| {m[(w, s)] / cp:.2f} | {m[(w, s)] / m[(w, 'floor-tar-sha256sum')]:.2f} |")
PY
