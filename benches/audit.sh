#!/usr/bin/env bash
# Fixed-workload benchmark of `exo audit`: 10 tenants, 1000 Agents, 2500
# agent-shaped pods (two containers, the token from a Secret, the baseline
# mounted read-only) and 2500 Secrets, plus the kube-system noise of the
# test cluster. Side by side in the same run:
#
#  - `exo audit -o json` (every rule over every tenant), with the number of
#    API requests it made (`--stats`);
#  - what a user would run instead to look at the same data: `kubectl get`
#    of the same nine kinds, cluster-wide, as JSON to /dev/null (and of
#    pods alone, for scale);
#  - the floor: the same nine LISTs as plain HTTP GETs with curl, one after
#    the other, bodies to /dev/null: what reading the data costs at least.
#
# Needs the test environment (`scripts/testenv up`). RUNS (default 7) per
# command; hyperfine's JSON goes to $OUT (default target/bench).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
OUT=${OUT:-$repo/target/bench}
RUNS=${RUNS:-7}
TENANTS=${TENANTS:-10}
AGENTS=${AGENTS:-100}   # per tenant
PODS=${PODS:-250}       # per tenant, and as many Secrets
mkdir -p "$OUT"
step() { printf '== %s (%s)\n' "$*" "$(date +%H:%M:%S)" >&2; }
command -v hyperfine >/dev/null || { echo "hyperfine is missing (scripts/deps installs it)" >&2; exit 1; }

step "release build"
cargo build --release --quiet --bin exo
EXO=${CARGO_TARGET_DIR:-$repo/target}/release/exo
work=$(mktemp -d)
prefix=bench-audit-$$
cleanup() {
  for i in $(seq 1 "$TENANTS"); do kubectl delete namespace "$prefix-$i" --wait=false >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

step "$TENANTS tenants: $((TENANTS * AGENTS)) Agents, $((TENANTS * PODS)) pods and as many Secrets"
"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
python3 - "$prefix" "$TENANTS" "$AGENTS" "$PODS" "$work" <<'PY'
import json, sys
prefix, tenants, agents, pods, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
img = "127.0.0.1:25000/exo/agent-runtime@sha256:" + "a" * 64
for t in range(1, tenants + 1):
    ns = f"{prefix}-{t}"
    items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]
    items.append({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Rollout",
                  "metadata": {"name": "release", "namespace": ns},
                  "spec": {"tenant": ns, "wave": "fleet", "release": "2026.11.0",
                           "commit": "0" * 40, "settings": {"nodeTier": "standard"}}})
    for a in range(agents):
        items.append({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
                      "metadata": {"name": f"agent-{a}", "namespace": ns},
                      "spec": {"runtime": {"image": img}, "agentlet": {"image": img},
                               "baseline": {"configMap": "agent-baseline-0457a0bebb"}, "paused": True}})
    for p in range(pods):
        items.append({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": f"agent-token-{p}", "namespace": ns,
                                   "labels": {"app.kubernetes.io/managed-by": "exo", "app.kubernetes.io/component": "agent"}},
                      "stringData": {"token": f"exo-token-{t}-{p}-0123456789abcdef"}})
        c = lambda n: {"name": n, "image": img,
                       "env": [{"name": "EXO_AGENT_TOKEN", "valueFrom": {"secretKeyRef": {"name": f"agent-token-{p}", "key": "token"}}}],
                       "volumeMounts": [{"name": "baseline", "mountPath": "/etc/exo/baseline", "readOnly": True}]}
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"agent-{p}", "namespace": ns},
                      "spec": {"nodeName": f"kwok-node-{1 + p % 2}", "containers": [c("agentlet"), c("runtime")],
                               "volumes": [{"name": "baseline", "configMap": {"name": "agent-baseline-0457a0bebb"}}]}})
    with open(f"{work}/tenant-{t}.json", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
PY
for i in $(seq 1 "$TENANTS"); do
  kubectl create -f "$work/tenant-$i.json" >/dev/null &
done
wait
step "objects: $(kubectl get pods -A --no-headers | wc -l) pods, $(kubectl get secrets -A --no-headers | wc -l) Secrets"

"$EXO" audit -o json --stats > "$work/report.json" 2> "$work/stats.txt" || true
cat "$work/stats.txt" >&2
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("findings:", len(r["findings"]), r["counts"])' "$work/report.json" >&2

api=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
pki=$EXO_TESTENV_DIR/pki
urls=""
for path in apis/autonomic.sh/v1alpha1/rollouts apis/autonomic.sh/v1alpha1/fleets api/v1/pods api/v1/nodes \
    apis/networking.k8s.io/v1/networkpolicies api/v1/secrets api/v1/configmaps api/v1/persistentvolumeclaims \
    apis/autonomic.sh/v1alpha1/tools; do
  urls="$urls $api/$path"
done
floor="curl -sf --cacert $pki/ca.crt --cert $pki/admin.crt --key $pki/admin.key -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null $urls"
$floor
kinds=rollouts.autonomic.sh,fleets.autonomic.sh,pods,nodes,networkpolicies,secrets,configmaps,persistentvolumeclaims,tools.autonomic.sh
step "hyperfine, $RUNS runs each"
hyperfine --runs "$RUNS" --warmup 1 -i --export-json "$OUT/audit.json" \
  -n "exo audit" "$EXO audit -o json > /dev/null" \
  -n "kubectl get (same 9 kinds)" "kubectl get $kinds -A -o json > /dev/null" \
  -n "kubectl get pods -A" "kubectl get pods -A -o json > /dev/null" \
  -n "curl, the 9 LISTs (floor)" "$floor"
python3 - "$OUT/audit.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
med = {x["command"]: x["median"] for x in r}
floor = med["curl, the 9 LISTs (floor)"]
for k, v in med.items():
    print(f"{k:40s} median {v:6.3f} s   x{v / floor:5.2f} of the floor")
PY
