#!/usr/bin/env bash
# Fixed-workload benchmark of a wave rollout: 1000 agents (10 tenants x 100)
# move between the example releases through canary -> low-risk -> fleet, with
# no soak time.
#
#   Exo:     `exo release rollout <release>` (promotion commits, sagas with
#            verified postconditions incl. one exec per agent, per wave);
#   kubectl: the same change by hand: per wave, `kubectl apply --server-side`
#            of the ConfigMaps and re-pointed Agents, then a
#            `kubectl rollout status`-style loop until every pod of the wave
#            runs the new image and is Ready.
#
# Both sides use the same operator to turn Agents into pods; the runs
# alternate direction (2026.11.0 <-> 2026.11.1), and after each timed kubectl
# run the cluster is put back (untimed) where git says it is. Needs the test
# environment (`scripts/testenv up`). Knobs: TENANTS (10), AGENTS (100 per
# tenant), RUNS (3).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
TENANTS=${TENANTS:-10}; AGENTS=${AGENTS:-100}; RUNS=${RUNS:-3}
# Fresh tenant names each invocation: re-creating namespaces of the same names
# while the garbage collector still tracks the old objects makes it delete
# the new pods.
P=b$(date +%s | tail -c 6)
OUT=${OUT:-$repo/target/bench}; mkdir -p "$OUT"
cargo build --release --quiet
EXO=$repo/target/release/exo
work=$(mktemp -d)
op_pid=
cleanup() {
  [ -n "$op_pid" ] && kill "$op_pid" 2>/dev/null || true
  cp "$work/operator.log" "$OUT/operator.log" 2>/dev/null || true
  kubectl delete ns exo-bench $(seq -f "$P-%02g" 0 $((TENANTS - 1))) --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

log "generating $TENANTS tenants x $AGENTS agents"
python3 - "$repo" "$work/fleet" "$TENANTS" "$AGENTS" "$EXO_TEST_REGISTRY" "$P" <<'PY'
import os, re, shutil, sys
repo, dst, tenants, agents, registry, p = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
shutil.copytree(f"{repo}/configmaps", f"{dst}/configmaps")
os.makedirs(f"{dst}/releases")
for f in os.listdir(f"{repo}/releases"):
    text = open(f"{repo}/releases/{f}").read()
    text = text.replace("[platform]", f"[{p}-00]").replace("[acme]", f"[{p}-01]")
    open(f"{dst}/releases/{f}", "w").write(text.replace("127.0.0.1:25000/", f"{registry}/"))
template = open(f"{repo}/manifests/acme/assistant.yaml").read().replace("127.0.0.1:25000/", f"{registry}/")
for t in range(tenants):
    d = f"{dst}/manifests/{p}-{t:02d}"
    os.makedirs(d)
    for a in range(agents):
        open(f"{d}/agent-{a:03d}.yaml", "w").write(template.replace("name: assistant", f"name: agent-{a:03d}"))
PY
bare="$EXO_TEST_GIT_ROOT/bench-fleet.git"; rm -rf "$bare"
git -C "$work/fleet" init -q -b main
git -C "$work/fleet" -c user.name=bench -c user.email=bench@exo.invalid add -A
git -C "$work/fleet" -c user.name=bench -c user.email=bench@exo.invalid commit -qm "bench fleet"
git clone -q --bare "$work/fleet" "$bare"
git -C "$work/fleet" remote add origin "$EXO_TEST_GIT_BASE/bench-fleet.git"
git -C "$work/fleet" fetch -q origin && git -C "$work/fleet" branch -q -u origin/main
git -C "$work/fleet" config user.name bench; git -C "$work/fleet" config user.email bench@exo.invalid
(cd "$work/fleet" && "$EXO" release lint >/dev/null)

"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl create ns exo-bench --dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: autonomic.sh/v1alpha1
kind: Fleet
metadata: {name: bench, namespace: exo-bench}
spec: {url: "$EXO_TEST_GIT_BASE/bench-fleet.git", allowInsecure: true, interval: 5s}
YAML
"$EXO" operator run --lease-namespace exo-bench --fleet-namespace exo-bench --metrics-addr 127.0.0.1:0 \
  --gitops-cache "$work/gitops" --rollout-poll-ms 200 > "$work/operator.log" 2>&1 &
op_pid=$!

all_verified() { # release
  [ "$(kubectl get ro -A --no-headers 2>/dev/null | awk -v r="$1" -v p="$P-" 'index($1, p) == 1 && $4 == r && $5 == "Verified"' | wc -l)" -eq "$TENANTS" ]
}
t0=$(date +%s.%N)
log "cold deploy of 2026.11.0 through the operator"
until all_verified 2026.11.0; do sleep 1; done
cold=$(echo "$(date +%s.%N) - $t0" | bc)
log "cold deploy verified in ${cold}s"

# The Agents of a release, rendered as the saga would apply them.
render() { # release tenant -> yaml on stdout
  python3 - "$work/fleet" "$1" "$2" <<'PY'
import re, sys, glob
root, release, tenant = sys.argv[1:4]
rel = open(f"{root}/releases/{release}.yaml").read()
imgs = dict(re.findall(r"image: (\S+)@(sha256:[0-9a-f]{64})", rel))
cms = dict(re.findall(r"- name: (\S+)\n\s+version: (\S+)", rel))
docs = []
for f in sorted(glob.glob(f"{root}/manifests/{tenant}/*.yaml")):
    text = open(f).read()
    text = re.sub(r"image: (\S+)@sha256:[0-9a-f]{64}", lambda m: f"image: {m.group(1)}@{imgs.get(m.group(1), m.group(0).split('@')[1])}", text)
    text = re.sub(r"configMap: (agent-baseline|platform-baseline)-[0-9a-f]{10}", lambda m: f"configMap: {cms[m.group(1)]}", text)
    docs.append(text.replace("metadata:\n", f"metadata:\n  namespace: {tenant}\n", 1))
print("---\n".join(docs))
PY
}
runtime_of() { grep -A3 'name: agent-runtime' "$work/fleet/releases/$1.yaml" | sed -n 's/.*image: //p' | head -1; }
waves() { echo "$P-00"; echo "$P-01"; seq -f "$P-%02g" 2 $((TENANTS - 1)) | tr '\n' ' '; echo; }

by_hand() { # release: the change with kubectl, wave by wave; prints seconds
  local release=$1 image start
  image=$(runtime_of "$release")
  "$EXO" config build --root "$work/fleet" > "$work/cms.yaml"
  start=$(date +%s.%N)
  while read -r wave; do
    [ -n "$wave" ] || continue
    local n=0 files=()
    for t in $wave; do
      kubectl apply --server-side --force-conflicts -n "$t" -f "$work/cms.yaml" >/dev/null
      render "$release" "$t" > "$work/agents-$t.yaml"; files+=(-f "$work/agents-$t.yaml")
      n=$((n + AGENTS))
    done
    kubectl apply --server-side --force-conflicts --field-manager exo-operator "${files[@]}" >/dev/null
    # rollout-status-style: every pod of the wave on the new image and Ready.
    until [ "$(kubectl get pods -A -l app.kubernetes.io/component=agent -o jsonpath='{range .items[*]}{.metadata.namespace} {.spec.containers[?(@.name=="runtime")].image} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' \
        | awk -v img="$image" -v w=" $wave " 'index(w, " " $1 " ") && $2 == img && $3 == "True" && $4 == ""' | wc -l)" -ge "$n" ]; do
      sleep 0.2
    done
  done < <(waves)
  echo "$(date +%s.%N) - $start" | bc
}

current=2026.11.0
: > "$OUT/rollout-exo.txt"; : > "$OUT/rollout-kubectl.txt"
for i in $(seq 1 "$RUNS"); do
  target=$([ "$current" = 2026.11.0 ] && echo 2026.11.1 || echo 2026.11.0)
  log "run $i: exo release rollout $target"
  start=$(date +%s.%N)
  (cd "$work/fleet" && git pull -q --ff-only && "$EXO" release rollout "$target" --timeout 20m > "$work/rollout-$i.log")
  exo_s=$(echo "$(date +%s.%N) - $start" | bc)
  log "run $i: exo ${exo_s}s"
  echo "$exo_s" >> "$OUT/rollout-exo.txt"
  # Where the time went: every tenant's saga steps with their timestamps.
  kubectl get ro -A -o json > "$OUT/rollout-status-$i.json"
  cp "$work/rollout-$i.log" "$OUT/rollout-cli-$i.log"
  log "run $i: kubectl apply + wait back to $current"
  k_s=$(by_hand "$current")
  log "run $i: kubectl ${k_s}s"
  echo "$k_s" >> "$OUT/rollout-kubectl.txt"
  log "run $i: restoring $target by hand (untimed), as git says"
  by_hand "$target" >/dev/null
  current=$target
done

python3 - "$OUT" "$TENANTS" "$AGENTS" "$cold" <<'PY'
import statistics, sys
out, tenants, agents, cold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
exo = [float(x) for x in open(f"{out}/rollout-exo.txt")]
k = [float(x) for x in open(f"{out}/rollout-kubectl.txt")]
me, mk = statistics.median(exo), statistics.median(k)
print(f"| rollout, {tenants*agents} agents in 3 waves, no soak | exo release rollout | {me:.1f} s | kubectl apply --server-side + wait per wave | {mk:.1f} s | {me/mk:.2f} |")
print(f"runs: exo {', '.join(f'{x:.1f}' for x in exo)}; kubectl {', '.join(f'{x:.1f}' for x in k)}; cold deploy of {tenants*agents} agents through the operator: {cold:.1f} s")
PY
