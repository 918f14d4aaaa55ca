#!/usr/bin/env bash
# Onboarding TENANTS (100) tenants at once (issue 28), side by side with
# doing their provisioning by hand with kubectl, in the same run.
#
#   Exo:     one commit adds TENANTS tenant folders (tier standard, one model,
#            a uid range each, one Agent from the example) to a fleet the
#            operator follows; the clock starts when the Fleet is asked to
#            sync and stops when every new Tenant is Active by a status
#            about its current spec (namespace, ServiceAccount, quota in
#            force, LimitRange, keys minted, Rollout Verified with its Agent
#            running, status projected).
#   kubectl: one `kubectl apply --server-side` of the same provisioning
#            objects for TENANTS other namespaces (Namespace, ServiceAccount,
#            ResourceQuota, LimitRange, a Secret of keys); the clock stops
#            when every quota is in force. No Agent, no verification: the
#            floor of what onboarding does by hand, not its equal.
#
# Writes: the operator's own counter (exo_operator_api_writes_total) by
# controller, before and after, per tenant; the tenant sagas' writes against
# their floor: the objects a tenant needs (Tenant, Namespace, ServiceAccount,
# ResourceQuota, LimitRange, Secret) plus one status write, 7.
#
# Needs the test environment (`scripts/testenv up`). Knobs: TENANTS (100),
# RUNS (3), EXO_BIN (a built binary instead of `cargo build --release`).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
TENANTS=${TENANTS:-100}; RUNS=${RUNS:-3}
P=t$(date +%s | tail -c 6)
OPS=$P-exo
op_pid=

cleanup() {
  set +e
  log "cleaning up"
  kubectl delete fleet -n "$OPS" bench --wait=false >/dev/null 2>&1
  [ -n "$op_pid" ] && kill "$op_pid" 2>/dev/null && wait "$op_pid" 2>/dev/null
  kubectl delete tenants -l "autonomic.sh/fleet-namespace=$OPS" --wait=false >/dev/null 2>&1
  # shellcheck disable=SC2046
  kubectl delete ns $(kubectl get ns -o name | sed -n "s|^namespace/\($P-.*\)|\1|p") --wait=false >/dev/null 2>&1
  rm -rf "$EXO_TEST_GIT_ROOT/$P-fleet.git"
  cp "$work"/operator.log "$OUT/tenants-operator.log" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/bench.py" <<'PY'
import json, os, re, shutil, subprocess, sys, time, urllib.request

def base(repo, dst, p, registry):
    """The example fleet, its tenants renamed <p>-<name>."""
    shutil.copytree(f"{repo}/configmaps", f"{dst}/configmaps")
    os.makedirs(f"{dst}/releases")
    names = [d for d in os.listdir(f"{repo}/manifests") if os.path.isdir(f"{repo}/manifests/{d}")]
    for f in os.listdir(f"{repo}/releases"):
        text = open(f"{repo}/releases/{f}").read()
        for n in names:
            text = text.replace(f"[{n}]", f"[{p}-{n}]")
        open(f"{dst}/releases/{f}", "w").write(text.replace("127.0.0.1:25000/", f"{registry}/"))
    os.makedirs(f"{dst}/manifests")
    shutil.copy(f"{repo}/manifests/tiers.yaml", f"{dst}/manifests/tiers.yaml")
    for n in names:
        d = f"{dst}/manifests/{p}-{n}"
        shutil.copytree(f"{repo}/manifests/{n}", d)
        for f in os.listdir(d):
            path = f"{d}/{f}"
            text = open(path).read().replace("127.0.0.1:25000/", f"{registry}/")
            open(path, "w").write(text)

def add(repo, dst, prefix, n, first_uid, registry):
    """n new tenants <prefix>-NNN, each with the example's assistant."""
    agent = open(f"{repo}/manifests/acme/assistant.yaml").read().replace("127.0.0.1:25000/", f"{registry}/")
    for i in range(n):
        d = f"{dst}/manifests/{prefix}-{i:03d}"
        os.makedirs(d)
        open(f"{d}/tenant.yaml", "w").write(
            "apiVersion: autonomic.sh/v1alpha1\nkind: Tenant\nspec:\n  tier: standard\n  wave: fleet\n"
            f"  uidRange: {{start: {first_uid + i * 10000}, size: 10000}}\n  models: [gpt-4o-mini]\n")
        open(f"{d}/assistant.yaml", "w").write(agent)

def by_hand(prefix, n, path):
    """What onboarding provisions, for kubectl apply."""
    docs = []
    for i in range(n):
        ns = f"{prefix}-{i:03d}"
        labels = {"bench": prefix}
        docs += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {**labels,
             "pod-security.kubernetes.io/enforce": "restricted"}}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "exo-tenant", "namespace": ns, "labels": labels},
             "automountServiceAccountToken": False},
            {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "exo-tenant", "namespace": ns, "labels": labels},
             "spec": {"hard": {"requests.cpu": "8", "requests.memory": "16Gi", "pods": "50", "requests.storage": "100Gi"}}},
            {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "exo-tenant", "namespace": ns, "labels": labels},
             "spec": {"limits": [{"type": "Container", "default": {"cpu": "250m", "memory": "256Mi"},
                                  "defaultRequest": {"cpu": "250m", "memory": "256Mi"}}]}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "exo-tenant-access", "namespace": ns, "labels": labels},
             "stringData": {"EXO_MODEL_KEY": os.urandom(11).hex()}},
        ]
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": docs}, f)

def active(ops, prefix, n):
    """How many of <prefix>-* Tenants are Active by a current status."""
    out = subprocess.run(["kubectl", "get", "tenants", "-l", f"autonomic.sh/fleet-namespace={ops}", "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    count = 0
    for t in json.loads(out)["items"]:
        if not t["metadata"]["name"].startswith(prefix + "-"):
            continue
        st = t.get("status") or {}
        if st.get("phase") == "Active" and st.get("observedGeneration") == t["metadata"].get("generation"):
            count += 1
    return count

def quotas_in_force(prefix):
    out = subprocess.run(["kubectl", "get", "resourcequota", "-A", "-l", f"bench={prefix}", "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    return sum(1 for q in json.loads(out)["items"] if (q.get("status") or {}).get("hard"))

def writes(addr):
    text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
    out = {}
    for m in re.finditer(r'^exo_operator_api_writes_total\{controller="(\w+)",kind="(\w+)",verb="(\w+)"\} (\d+)', text, re.M):
        out[f"{m[1]}/{m[2]}/{m[3]}"] = int(m[4])
    return out

cmd = sys.argv[1]
if cmd == "base": base(*sys.argv[2:])
elif cmd == "add": add(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
elif cmd == "by-hand": by_hand(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif cmd == "active": print(active(sys.argv[2], sys.argv[3], int(sys.argv[4])))
elif cmd == "quotas": print(quotas_in_force(sys.argv[2]))
elif cmd == "writes": print(json.dumps(writes(sys.argv[2])))
PY
py() { python3 "$work/bench.py" "$@"; }

log "fleet: the example's tenants, then $RUNS x $TENANTS new ones"
fleet=$work/fleet; mkdir -p "$fleet"
py base "$repo" "$fleet" "$P" "$EXO_TEST_REGISTRY"
git -C "$fleet" init -q -b main
git -C "$fleet" -c user.name=bench -c user.email=bench@exo.invalid add -A
git -C "$fleet" -c user.name=bench -c user.email=bench@exo.invalid commit -qm base
git clone -q --bare "$fleet" "$EXO_TEST_GIT_ROOT/$P-fleet.git"
git -C "$fleet" remote add origin "$EXO_TEST_GIT_BASE/$P-fleet.git"

kubectl create namespace "$OPS" >/dev/null
kubectl -n "$OPS" create secret generic exo-key-actuator --from-literal=type=kubernetes >/dev/null
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: autonomic.sh/v1alpha1
kind: Fleet
metadata: {name: bench, namespace: $OPS}
spec: {url: "$EXO_TEST_GIT_BASE/$P-fleet.git", branch: main, interval: 1h, allowInsecure: true}
YAML
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
RUST_LOG=info,kube=warn "$EXO" operator run --lease-namespace "$OPS" --fleet-namespace "$OPS" \
  --metrics-addr "$addr" --upstream-health-addr 127.0.0.1:0 --gitops-cache "$work/gitops" \
  > "$work/operator.log" 2>&1 &
op_pid=$!
sync_now() {
  kubectl -n "$OPS" annotate fleet bench --overwrite "autonomic.sh/sync-requested-at=$(date +%s%N)" >/dev/null
}
wait_active() { # prefix n timeout
  local deadline=$(( $(date +%s) + $3 ))
  until [ "$(py active "$OPS" "$1" "$2")" -ge "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "not all Active in $3 s"; tail -20 "$work/operator.log"; exit 1; }
    sleep 0.5
  done
}
sync_now
wait_active "$P" 5 300
log "the example's 5 tenants are Active"

results=$work/results.jsonl
for run in $(seq 1 "$RUNS"); do
  prefix=$P-r$run
  py add "$repo" "$fleet" "$prefix" "$TENANTS" $(( 1000000 + run * 2000000 )) "$EXO_TEST_REGISTRY"
  git -C "$fleet" -c user.name=bench -c user.email=bench@exo.invalid add -A
  git -C "$fleet" -c user.name=bench -c user.email=bench@exo.invalid commit -qm "onboard $TENANTS tenants"
  git -C "$fleet" push -q origin main
  before=$(py writes "$addr")
  t0=$(date +%s.%N)
  sync_now
  wait_active "$prefix" "$TENANTS" 900
  t1=$(date +%s.%N)
  sleep 2
  after=$(py writes "$addr")
  # kubectl, the same objects by hand
  py by-hand "$P-k$run" "$TENANTS" "$work/by-hand.json"
  k0=$(date +%s.%N)
  kubectl apply --server-side -f "$work/by-hand.json" >/dev/null
  until [ "$(py quotas "$P-k$run")" -ge "$TENANTS" ]; do sleep 0.2; done
  k1=$(date +%s.%N)
  python3 - "$before" "$after" "$t0" "$t1" "$k0" "$k1" "$TENANTS" "$run" >> "$results" <<'PY'
import json, sys
before, after = json.loads(sys.argv[1]), json.loads(sys.argv[2])
t0, t1, k0, k1, n, run = map(float, sys.argv[3:9])
d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
by_controller = {}
for k, v in d.items():
    c = k.split("/")[0]
    by_controller[c] = by_controller.get(c, 0) + v
tenant_saga = {k: v for k, v in d.items() if k.startswith("Tenant/") and v}
# The sync's Tenant create is counted under Rollout/Tenant.
tenant_writes = sum(tenant_saga.values()) + d.get("Rollout/Tenant/Apply", 0)
print(json.dumps({"run": int(run), "tenants": int(n), "exo_secs": round(t1 - t0, 2), "kubectl_secs": round(k1 - k0, 2),
                  "writes_per_tenant": {c: round(v / n, 2) for c, v in sorted(by_controller.items()) if v},
                  "tenant_saga_per_tenant": round(tenant_writes / n, 2),
                  "tenant_saga_by_kind": {k: round(v / n, 2) for k, v in sorted(tenant_saga.items())}}))
PY
  tail -1 "$results" >&2
  # The next run starts from a quiet operator.
  sleep 5
done
cp "$results" "$OUT/tenants.jsonl"
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
e = statistics.median(r["exo_secs"] for r in rows)
k = statistics.median(r["kubectl_secs"] for r in rows)
w = statistics.median(r["tenant_saga_per_tenant"] for r in rows)
print(f"runs: {len(rows)}, tenants per run: {rows[0]['tenants']}")
print(f"Exo, commit to all Active (verified): median {e:.1f} s ({e / rows[0]['tenants'] * 1000:.0f} ms per tenant)")
print(f"kubectl apply of the provisioning objects, to quotas in force: median {k:.1f} s; ratio {e / k:.1f}x")
print(f"tenant saga writes per tenant: median {w:.1f}, floor 7, ratio {w / 7:.2f}x")
print("per run:")
for r in rows:
    print(json.dumps(r))
PY
