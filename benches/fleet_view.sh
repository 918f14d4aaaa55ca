#!/usr/bin/env bash
# Fixed-workload benchmark of the fleet view across clusters (issue 34,
# part 5), side by side in the same run with what a user would do instead:
#
#  - Exo: three `exo control-plane serve` replicas on the test
#    environment's PostgreSQL, DEPLOYMENTS (default 100) simulated clusters,
#    each one WebSocket speaking the real protocol (hello, a snapshot of 10
#    tenants' Rollouts with their saga steps, heartbeats, deltas), spread
#    evenly over the replicas. `GET /api/v1/fleet/rollouts` (the whole
#    fleet) and `?tenant=` (one tenant on every cluster), QUERIES (500)
#    each, asked of the replicas in turn; `GET /healthz` on the same
#    connections is the HTTP round trip's floor. Then the gate's decision
#    time, TRIALS (50) times: a pair's Rollout turns Verified (a delta
#    from its operator) and a reader polling `?tenant=` tightly on a
#    replica that does not hold that cluster sees it.
#    (`cargo bench --bench upstream -- fleet N`, benches/upstream/fleet.rs)
#  - instead: `kubectl get rollouts -A -o json` once per cluster, 100
#    times in a row, against the test environment's apiserver holding 10
#    Rollouts of the same shape (spec and 12 saga steps in the status):
#    the floor of asking each cluster for its Rollouts, one after another,
#    without a control plane. The per-call figures are kubectl's own
#    (process start, kubeconfig, discovery cache, TLS, the LIST).
#
# Needs the test environment (`scripts/testenv up`). Prints the raw
# figures; BENCHMARKS.md, "Fleet view across clusters", has the table.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
DEPLOYMENTS=${DEPLOYMENTS:-100}
QUERIES=${QUERIES:-500}
TRIALS=${TRIALS:-50}
step() { printf '== %s (%s)\n' "$*" "$(date +%H:%M:%S)" >&2; }
ns=bench-fleet-$$
work=$(mktemp -d)
cleanup() {
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step "the Rollout CRD and 10 Rollouts in $ns"
kubectl apply --server-side -f deploy/crds/ >/dev/null
kubectl wait --for condition=established --timeout=60s crd/rollouts.autonomic.sh >/dev/null
kubectl create namespace "$ns" >/dev/null
steps=""
for s in isolated configmaps-published repointed/broker pods-rolled/broker verified/broker \
  repointed/router pods-rolled/router verified/router repointed/agents pods-rolled/agents \
  verified/agents pruned; do
  steps+="{\"name\":\"$s\",\"state\":\"Done\",\"owner\":\"exo-operator-0\",\"startedAt\":\"2026-12-07T04:00:00Z\",\"finishedAt\":\"2026-12-07T04:00:01Z\"},"
done
hash=sha256:$(printf '%064d' 1)
for t in $(seq 0 9); do
  cat >"$work/r$t.yaml" <<YAML
apiVersion: autonomic.sh/v1alpha1
kind: Rollout
metadata: {name: t$t, namespace: $ns}
spec: {tenant: t$t, wave: canary, release: 2026.11.1, commit: 0123456789abcdef0123456789abcdef01234567, desiredHash: "$hash"}
YAML
  kubectl apply -f "$work/r$t.yaml" >/dev/null
  kubectl patch rollout "t$t" -n "$ns" --subresource=status --type=merge -p \
    "{\"status\":{\"phase\":\"Verified\",\"observedGeneration\":1,\"desiredHash\":\"$hash\",\"release\":\"2026.11.1\",\"steps\":[${steps%,}]}}" >/dev/null
done
[ "$(kubectl get rollouts -n "$ns" -o name | wc -l)" = 10 ] || { echo "the 10 Rollouts are not there" >&2; exit 1; }

step "kubectl get rollouts -A -o json, 100 times in a row"
kubectl get rollouts -A -o json >/dev/null # warm the discovery cache
: >"$work/kubectl.ms"
all=$(date +%s%N)
for _ in $(seq 1 100); do
  t=$(date +%s%N)
  kubectl get rollouts -A -o json >/dev/null
  echo $(( ($(date +%s%N) - t) / 1000 )) >>"$work/kubectl.ms"
done
total_ms=$(( ($(date +%s%N) - all) / 1000000 ))
sort -n "$work/kubectl.ms" | awk -v total="$total_ms" '
  { v[NR] = $1 / 1000 }
  END {
    p50 = v[int((NR - 1) * 0.5 + 0.5) + 1]; p99 = v[int((NR - 1) * 0.99 + 0.5) + 1]
    printf "kubectl: one cluster n=%d p50=%.1fms p99=%.1fms max=%.1fms; 100 clusters in a row: %d ms\n",
      NR, p50, p99, v[NR], total
  }'
kubectl get rollouts -A -o json | wc -c | awk '{print "kubectl: answer " $1 " bytes"}'

step "the control plane: $DEPLOYMENTS clusters x 10 tenants, 3 replicas on PostgreSQL"
ulimit -n 20000 2>/dev/null || true
cargo bench --quiet --bench upstream -- queries "$QUERIES" trials "$TRIALS" fleet "$DEPLOYMENTS"
