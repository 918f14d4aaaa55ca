#!/usr/bin/env bash
# Incidents from the tenant outbox to the support lane (issue 30), end to
# end and against the store's floor, in one run:
#
# - Exo: AGENTS agents post INCIDENTS incidents at once (one thread per
#   agent, `POST /v1/incidents` with its own token) to a managed
#   `exo operator run`; the leader routes them to `exo control-plane serve`
#   (SQLite), which stores each in the lane and acknowledges it. Measured:
#   from the first post to the last incident stored in the lane (the
#   throughput), and per incident from its post to its row's `stored_ms`
#   (the latency; the ack follows on the same connection).
# - Floor: the same number of rows inserted into a control-plane database
#   with the store's own statement, one transaction each, one after the
#   other (python's sqlite3 on the same file settings: WAL, the default
#   synchronous): what one lane's storage costs with nothing else.
# - The way back: support acknowledges every one of them through the lane
#   API (4 clients), and the control plane sends each down to the operator,
#   which writes the Incident's status and answers; measured from the first
#   ack to the last incident marked delivered (the tenant's view shows it),
#   and per incident from its ack to that. Its floor: the same number of
#   status writes straight to the apiserver (a merge patch each through
#   `kubectl proxy`, 8 at a time as the dispatcher writes), the one write
#   per incident the way back cannot do without.
#
# RUNS runs of each, medians. Needs the test environment (`scripts/testenv
# up`). Knobs: AGENTS (10), INCIDENTS (400 per run; the lane's listing
# returns the newest 500), RUNS (3), EXO_BIN.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
AGENTS=${AGENTS:-10}; INCIDENTS=${INCIDENTS:-400}; RUNS=${RUNS:-3}
ns=bench-inc-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  cp "$work/op.log" "$OUT/incidents-operator.log" 2>/dev/null || true
  cp "$work/cp.log" "$OUT/incidents-control-plane.log" 2>/dev/null || true
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl wait --for condition=established --timeout=60s crd/agents.autonomic.sh crd/incidents.autonomic.sh >/dev/null
kubectl create namespace "$ns" >/dev/null
python3 - "$ns" "$AGENTS" "$work/agents.json" <<'PY'
import json, sys
ns, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
img = lambda what: f"127.0.0.1:25000/exo/{what}@sha256:" + "a" * 64
items = [{"apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
          "metadata": {"name": f"a{i}", "namespace": ns},
          "spec": {"runtime": {"image": img("runtime")}, "agentlet": {"image": img("agentlet")}}}
         for i in range(n)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(out, "w"))
PY
kubectl create -f "$work/agents.json" >/dev/null

"$EXO" control-plane --db "$work/cp.sqlite" serve --listen 127.0.0.1:0 >"$work/cp.out" 2>"$work/cp.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/cp.out" && break; sleep 0.1; done
base=$(sed -n 's/^listening on //p' "$work/cp.out")
token=$("$EXO" control-plane --db "$work/cp.sqlite" deployment create bench)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
addr=127.0.0.1:$(free_port)
AUTONOMIC_MANAGED=true AUTONOMIC_BASE_URL="$base" AUTONOMIC_AUTH_TOKEN="$token" \
  EXO_UPSTREAM_HEALTH_ADDR=127.0.0.1:$(free_port) RUST_LOG=info \
  "$EXO" operator run -n "$ns" --lease-namespace "$ns" --identity "inc-$$" \
  --metrics-addr "$addr" --lease-duration 3 --incident-rate 1000000 >"$work/op.log" 2>&1 &
pids+=($!)
secrets_made() {
  for i in $(seq 0 $((AGENTS - 1))); do
    kubectl -n "$ns" get secret "agent-token-a$i" >/dev/null 2>&1 || return 1
  done
}
wait_until 120 "the agents' token Secrets" secrets_made
connected() { curl -sf "$base/api/v1/deployments/bench" | grep -q '"connected":true'; }
wait_until 120 "the operator connected upstream" connected
for i in $(seq 0 $((AGENTS - 1))); do
  kubectl -n "$ns" get secret "agent-token-a$i" -o jsonpath='{.data.token}' | base64 -d >"$work/token-a$i"
done
# The tenant's lane, by hand.
curl -sf -X PUT -H 'Content-Type: application/json' -d '{}' \
  "$base/api/v1/lanes/bench-desk/tenants/bench/$ns" >/dev/null
proxy_port=$(free_port)
kubectl proxy --port "$proxy_port" >"$work/proxy.log" 2>&1 &
pids+=($!)
wait_until 30 "kubectl proxy" curl -sf "http://127.0.0.1:$proxy_port/version" -o /dev/null

for run in $(seq "$RUNS"); do
  log "run $run: $INCIDENTS incidents from $AGENTS agents"
  python3 - "$addr" "$ns" "$AGENTS" "$INCIDENTS" "$run" "$work" "$base" >>"$work/runs.jsonl" <<'PY'
import http.client, json, sys, threading, time, urllib.request
addr, ns, agents, total, run, work, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
host, port = addr.split(":")
posted = {}
lock = threading.Lock()
def agent(i):
    token = open(f"{work}/token-a{i}").read().strip()
    c = http.client.HTTPConnection(host, int(port))
    for n in range(i, total, agents):
        body = json.dumps({"severity": "error", "summary": f"Report {n} could not be sent.",
                           "detail": f"attempt {n} of run {run}", "idempotencyKey": f"r{run}-{n}"})
        t = time.time() * 1000
        c.request("POST", "/v1/incidents", body, {"Authorization": f"Bearer {token}",
                  "X-Exo-Agent": f"{ns}/a{i}", "Content-Type": "application/json"})
        r = c.getresponse(); data = r.read()
        if r.status != 202:
            sys.exit(f"post {n}: {r.status} {data!r}")
        with lock:
            posted[json.loads(data)["id"]] = t
threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
start = time.time() * 1000
for t in threads: t.start()
for t in threads: t.join()
if len(posted) != total:
    sys.exit(f"{len(posted)} of {total} posts stored")
deadline = time.time() + 120
while True:
    rows = json.load(urllib.request.urlopen(f"{base}/api/v1/deployments/bench/incidents"))["incidents"]
    stored = {r["id"]: r["stored_ms"] for r in rows if r["id"] in posted}
    if len(stored) == total:
        break
    if time.time() > deadline:
        sys.exit(f"only {len(stored)} of {total} in the lane after 120 s")
    time.sleep(0.05)
lat = sorted(stored[i] - posted[i] for i in posted)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
secs = (max(stored.values()) - start) / 1000
print(json.dumps({"side": "exo", "run": int(run), "secs": secs, "per_sec": total / secs,
                  "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": lat[-1]}))
sys.stdout.flush()
# The way back: support acknowledges each; the tenant's view follows.
ids = sorted(posted)
acked = {}
def support(chunk):
    c = http.client.HTTPConnection(*base.removeprefix("http://").split(":"))
    for i in chunk:
        t = time.time() * 1000
        c.request("POST", f"/api/v1/lanes/bench-desk/incidents/{i}/ack", "{}", {"Content-Type": "application/json"})
        r = c.getresponse(); data = r.read()
        if r.status != 200:
            sys.exit(f"ack {i}: {r.status} {data!r}")
        with lock:
            acked[i] = t
threads = [threading.Thread(target=support, args=(ids[k::4],)) for k in range(4)]
start = time.time() * 1000
for t in threads: t.start()
for t in threads: t.join()
seen = {}
deadline = time.time() + 120
while len(seen) < total:
    rows = json.load(urllib.request.urlopen(f"{base}/api/v1/lanes/bench-desk/incidents?limit=5000&state=acknowledged"))["incidents"]
    now = time.time() * 1000
    for r in rows:
        if r["id"] in acked and r["delivered"] and r["id"] not in seen:
            seen[r["id"]] = now
    if time.time() > deadline:
        sys.exit(f"only {len(seen)} of {total} acknowledgements reached the cluster after 120 s")
    time.sleep(0.02)
lat = sorted(seen[i] - acked[i] for i in ids)
secs = (max(seen.values()) - start) / 1000
print(json.dumps({"side": "back", "run": int(run), "secs": secs, "per_sec": total / secs,
                  "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": lat[-1]}))
json.dump(ids, open(f"{work}/ids-{run}.json", "w"))
PY
  tail -2 "$work/runs.jsonl" >&2
  # The way back's floor: one status write per incident, straight to the
  # apiserver.
  python3 - "$proxy_port" "$ns" "$work/ids-$run.json" "$run" >>"$work/runs.jsonl" <<'PY'
import http.client, json, sys, threading, time
port, ns, ids, run = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), int(sys.argv[4])
def writer(chunk):
    c = http.client.HTTPConnection("127.0.0.1", int(port))
    for i in chunk:
        body = json.dumps({"status": {"state": "Resolved", "resolvedAt": "2026-12-06T00:00:00Z", "observedGeneration": 1}})
        c.request("PATCH", f"/apis/autonomic.sh/v1alpha1/namespaces/{ns}/incidents/{i}/status", body,
                  {"Content-Type": "application/merge-patch+json"})
        r = c.getresponse(); data = r.read()
        if r.status != 200:
            sys.exit(f"patch {i}: {r.status} {data[:200]!r}")
# As many writers at once as the dispatcher uses (UPDATE_WRITERS).
threads = [threading.Thread(target=writer, args=(ids[k::8],)) for k in range(8)]
start = time.time()
for t in threads: t.start()
for t in threads: t.join()
secs = time.time() - start
print(json.dumps({"side": "back-floor", "run": run, "secs": secs, "per_sec": len(ids) / secs}))
PY
  tail -1 "$work/runs.jsonl" >&2
  # The floor, on a database of its own with the control plane's schema.
  rm -f "$work/floor.sqlite"*
  "$EXO" control-plane --db "$work/floor.sqlite" deployment create floor >/dev/null
  python3 - "$work/floor.sqlite" "$INCIDENTS" "$run" >>"$work/runs.jsonl" <<'PY'
import json, sqlite3, sys, time
db, total, run = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = sqlite3.connect(db, isolation_level=None)
assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
sql = """INSERT INTO incidents (deployment, id, tenant, agent, severity, summary, detail,
         correlation_id, received_at, lane, stored_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
           (SELECT lane FROM tenants WHERE deployment = ?1 AND tenant = ?3), ?10)
         ON CONFLICT (deployment, id) DO NOTHING"""
start = time.time()
for n in range(total):
    c.execute("BEGIN")
    c.execute(sql, ("floor", f"inc-{n:024x}", "t", f"a{n % 10}", "error", f"Report {n} could not be sent.",
                    f"attempt {n}", "", "2026-12-06T00:00:00Z", int(time.time() * 1000)))
    c.execute("SELECT lane FROM incidents WHERE deployment = ?1 AND id = ?2", ("floor", f"inc-{n:024x}")).fetchone()
    c.execute("COMMIT")
secs = time.time() - start
print(json.dumps({"side": "floor", "run": run, "secs": secs, "per_sec": total / secs}))
PY
  tail -1 "$work/runs.jsonl" >&2
done

python3 - "$work/runs.jsonl" "$AGENTS" "$INCIDENTS" >"$OUT/incidents-summary.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
agents, total = sys.argv[2], sys.argv[3]
exo = [r for r in rows if r["side"] == "exo"]; floor = [r for r in rows if r["side"] == "floor"]
m = lambda xs, k: statistics.median(x[k] for x in xs)
e, f = m(exo, "per_sec"), m(floor, "per_sec")
print(f"| {total} incidents from {agents} agents, {len(exo)} runs | Exo: post -> operator -> lane stored and acked | "
      f"**{e:.0f}/s** | plain insert into the lane's table, one transaction each | **{f:.0f}/s** | **{e / f:.2f}** |")
print("exo per run (/s): " + ", ".join(f"{r['per_sec']:.0f}" for r in exo)
      + "; floor per run (/s): " + ", ".join(f"{r['per_sec']:.0f}" for r in floor))
print(f"post -> stored in the lane (ms, median of runs): p50 {m(exo, 'p50_ms'):.0f}, p99 {m(exo, 'p99_ms'):.0f}, max {m(exo, 'max_ms'):.0f}")
back = [r for r in rows if r["side"] == "back"]; bfloor = [r for r in rows if r["side"] == "back-floor"]
b, bf = m(back, "per_sec"), m(bfloor, "per_sec")
print(f"| {total} acknowledgements, {len(back)} runs | Exo: ack -> control plane -> operator status write -> delivered | "
      f"**{b:.0f}/s** | status write straight to the apiserver, 8 at a time | **{bf:.0f}/s** | **{b / bf:.2f}** |")
print("back per run (/s): " + ", ".join(f"{r['per_sec']:.0f}" for r in back)
      + "; floor per run (/s): " + ", ".join(f"{r['per_sec']:.0f}" for r in bfloor))
print(f"ack -> the tenant's view shows it (ms, median of runs): p50 {m(back, 'p50_ms'):.0f}, p99 {m(back, 'p99_ms'):.0f}, max {m(back, 'max_ms'):.0f}")
PY
cat "$OUT/incidents-summary.txt"
cp "$work/runs.jsonl" "$OUT/incidents-runs.jsonl"
log "results in $OUT/incidents-*"
