#!/usr/bin/env bash
# Fixed-workload benchmark of continuous GitOps (issue 11) on a 1000-Agent
# fleet (10 tenants x 100 Agents, generated like `benches/rollout.sh` does).
#
# 1. Push to verified: a one-Agent edit (an env var value that changes per
#    run), measured side by side in the same run, alternating which goes
#    first:
#      Exo:     commit, push to the test git daemon, POST the signed push
#               hook; done when that tenant's Rollout is current, `Verified`
#               and at the pushed commit (its saga also rolls the pod and
#               execs into the tenant's pods to verify live content);
#      kubectl: `kubectl apply --server-side` of the same edit to an Agent of
#               the same template in a namespace git does not manage; done
#               when its new pod is Running and Ready.
#    Both sides use the same operator. The Fleet interval is 1h, so only the
#    hook triggers syncs.
# 2. Baseline: a baseline ConfigMap change in one tenant, BASELINE_RUNS
#    times: Exo verifies every pod that mounts the map and no
#    other (execs and re-created pods counted); kubectl re-points the same
#    number of Agents in one apply and waits for their pods.
# 3. Steady-state cost, nothing changing, for STEADY_SECS each: the operator's
#    CPU, its API writes (its own counter) and the apiserver's requests by
#    verb minus a floor window of the same cluster with the operator stopped,
#    and the live re-check execs; once with `reverifyInterval: 1h` (nothing to
#    do) and once with the default `10m`.
#
# Needs the test environment (`scripts/testenv up`; set EXO_TESTENV_DIR to use
# another checkout's). Knobs: TENANTS (10), AGENTS (100 per tenant), RUNS (5),
# STEADY_SECS (600), FLOOR_SECS (300), SETTLE_SECS (90), SLICE_SECS (30),
# STEADY_INTERVAL
# (the Fleet interval in the steady phase, 1m), ROLLOUT_POLL_MS (the
# operator's default, 500), PHASES ("push baseline steady"; "analysis" adds
# a window with the fleet wave's analysis running, ANALYSIS_INTERVAL 10s), BASELINE_RUNS
# (3), EXO_BIN (a built binary
# instead of `cargo build --release`; for trying the script only).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
TENANTS=${TENANTS:-10}; AGENTS=${AGENTS:-100}; RUNS=${RUNS:-5}
STEADY_SECS=${STEADY_SECS:-600}; FLOOR_SECS=${FLOOR_SECS:-300}; SETTLE_SECS=${SETTLE_SECS:-90}
SLICE_SECS=${SLICE_SECS:-30}
STEADY_INTERVAL=${STEADY_INTERVAL:-1m}; ROLLOUT_POLL_MS=${ROLLOUT_POLL_MS:-500}
PHASES=${PHASES:-push baseline steady}; BASELINE_RUNS=${BASELINE_RUNS:-3}
ANALYSIS_INTERVAL=${ANALYSIS_INTERVAL:-10s}
# Fresh names each invocation (see benches/rollout.sh for why).
P=g$(date +%s | tail -c 6)
OPS=$P-exo          # the Fleet, its hook Secret and the Lease
KNS=$P-kubectl      # Agents applied by hand, outside git
tenants=$(seq -f "$P-%02g" 0 $((TENANTS - 1)))
op_pid=; bg_pids=()

cleanup() {
  set +e
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  log "cleaning up: deleting the bench namespaces"
  kubectl delete fleet -n "$OPS" bench --wait=false >/dev/null 2>&1
  # The operator must run while the namespaces go: it removes the Agents'
  # finalizers.
  [ -n "$op_pid" ] || start_operator >/dev/null 2>&1
  # shellcheck disable=SC2086
  kubectl delete ns $tenants "$KNS" --wait=false >/dev/null 2>&1
  # A second per 10 Agents, at least 300 s: at 10,000 Agents on a busy
  # machine 300 s was not enough, and an operator stopped early leaves the
  # rest of the Agents' finalizers (and their namespaces) behind.
  local wait_s=$(( TENANTS * AGENTS / 10 > 300 ? TENANTS * AGENTS / 10 : 300 ))
  # shellcheck disable=SC2086
  if ! timeout "$wait_s" kubectl wait --for=delete ns $tenants "$KNS" --timeout="${wait_s}s" >/dev/null 2>&1; then
    log "cleanup: namespaces still going after ${wait_s}s; the operator stops now and Agents may keep their finalizers"
  fi
  stop_operator
  kubectl delete ns "$OPS" --wait=false >/dev/null 2>&1
  rm -rf "$EXO_TEST_GIT_ROOT/$P-fleet.git"
  cp "$work"/operator-*.log "$OUT/" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# ------------------------------------------------------------------ helpers
# Python side: fleet generation, watches with millisecond timestamps, the
# signed hook, metric snapshots and the summary.
cat > "$work/bench.py" <<'PY'
import hashlib, hmac, json, os, re, shutil, subprocess, sys, time, urllib.request

def gen(repo, dst, tenants, agents, registry, p):
    """The fleet of benches/rollout.sh, each Agent with an env var to edit."""
    shutil.copytree(f"{repo}/configmaps", f"{dst}/configmaps")
    os.makedirs(f"{dst}/releases")
    for f in os.listdir(f"{repo}/releases"):
        text = open(f"{repo}/releases/{f}").read()
        text = text.replace("[platform]", f"[{p}-00]").replace("[acme]", f"[{p}-01]")
        open(f"{dst}/releases/{f}", "w").write(text.replace("127.0.0.1:25000/", f"{registry}/"))
    template = open(f"{repo}/manifests/acme/assistant.yaml").read().replace("127.0.0.1:25000/", f"{registry}/")
    template = re.sub(r"(  runtime:\n    image: \S+\n)", r'\1    env:\n      - name: BENCH_EDIT\n        value: "0"\n', template)
    assert "BENCH_EDIT" in template, "the Agent template has no runtime image line"
    for t in range(int(tenants)):
        d = f"{dst}/manifests/{p}-{t:02d}"
        os.makedirs(d)
        for a in range(int(agents)):
            open(f"{d}/agent-{a:03d}.yaml", "w").write(template.replace("name: assistant", f"name: agent-{a:03d}"))

def edit(path, value):
    text = open(path).read()
    new = re.sub(r'(- name: BENCH_EDIT\n\s+value: )"[^"]*"', rf'\1"{value}"', text)
    assert new != text or f'"{value}"' in text, f"{path}: no BENCH_EDIT value"
    open(path, "w").write(new)

def spawn(cmd):
    """A kubectl watch that ends with this process, however it ends."""
    import ctypes, signal
    libc = ctypes.CDLL(None, use_errno=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: libc.prctl(1, signal.SIGTERM))  # PR_SET_PDEATHSIG

def objects(cmd):
    """Objects printed by `kubectl get -w -o json`, one by one, as they come
    (the items of a List, which kubectl prints for a long first listing)."""
    proc = spawn(cmd)
    buf = []
    try:
        for line in proc.stdout:
            buf.append(line)
            if line.rstrip("\n") == "}":
                obj = json.loads("".join(buf))
                buf = []
                if obj.get("kind") == "List":
                    yield from obj.get("items", [])
                elif obj.get("kind") == "Status":
                    # A watch error (an expired resourceVersion, a
                    # timeout): kubectl goes on or ends; no object here.
                    print(f"watch: {obj.get('message', obj)}", file=sys.stderr, flush=True)
                else:
                    yield obj
    finally:
        proc.terminate()

def watch_rollout(ns, events_file):
    """Until the Rollout is current, Verified and at a commit other than the
    one it had when the watch started; every change is logged with its time.
    Prints the time it was done and the commit."""
    first = None
    with open(events_file, "w") as ev:
        for ro in objects(["kubectl", "get", "ro", "release", "-n", ns, "-w", "-o", "json"]):
            t = time.time()
            spec, st = ro["spec"], ro.get("status") or {}
            current = st.get("observedGeneration") == ro["metadata"].get("generation") and st.get("desiredHash") == spec.get("desiredHash")
            ev.write(json.dumps({"t": t, "commit": spec.get("commit"), "current": current, "phase": st.get("phase"),
                                 "step": st.get("currentStep"), "applied": st.get("appliedCommit"),
                                 "steps": st.get("steps", [])}) + "\n")
            ev.flush()
            if first is None:
                first = spec.get("commit")
                print("ready", flush=True)
                continue
            if current and st.get("phase") == "Verified" and st.get("appliedCommit") == spec.get("commit") != first:
                print(f"{t:.3f} {spec['commit']}", flush=True)
                return

def watch_pod(ns, agent, value):
    """Until the Agent's pod with BENCH_EDIT=value is Running, Ready and not
    terminating. Prints the time it was seen."""
    seen = False
    for pod in objects(["kubectl", "get", "pods", "-n", ns, "-l", f"autonomic.sh/agent={agent}", "-w", "-o", "json"]):
        t = time.time()
        if not seen:
            seen = True
            print("ready", flush=True)
        env = {e["name"]: e.get("value") for c in pod["spec"]["containers"] if c["name"] == "runtime" for e in c.get("env", [])}
        st = pod.get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
        if env.get("BENCH_EDIT") == value and st.get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp"):
            print(f"{t:.3f}", flush=True)
            return

def hook(addr, ns, name, token_file):
    """Reads a commit from stdin, POSTs a signed push notification for it,
    and prints the HTTP status and the times the request was sent and
    answered. Started ahead, so that the interpreter's start-up is not in
    the measured time (a git host's sender is already running)."""
    key = open(token_file).read().strip().encode()
    print("ready", flush=True)
    commit = sys.stdin.readline().strip()
    body = json.dumps({"ref": "refs/heads/main", "after": commit}).encode()
    sig = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"http://{addr}/hooks/fleet/{ns}/{name}", data=body, method="POST",
                                 headers={"X-Hub-Signature-256": sig, "Content-Type": "application/json"})
    t = time.time()
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            code = r.status
    except urllib.error.HTTPError as e:
        code = e.code
    print(f"{code} {t:.3f} {time.time():.3f}", flush=True)

def baseline_release(fleet, i, version_from):
    """releases/2026.12.<i>.yaml: 2026.11.0 with the agent baseline pinned as
    in `version_from` (a release file), and the canary wave pointed at it.
    Prints the version of the agent baseline it pins."""
    text = open(f"{fleet}/releases/2026.11.0.yaml").read()
    src = open(version_from).read()
    pin = lambda t, key: next(l for l in t.splitlines() if l.strip().startswith(key) and ("agent-baseline" in l or key == "sha256:"))
    new = text.replace("2026.11.0", f"2026.12.{i}")
    for key in ("version: agent-baseline", "sha256:"):
        new = new.replace(pin(text, key), pin(src, key), 1)
    open(f"{fleet}/releases/2026.12.{i}.yaml", "w").write(new)
    waves = open(f"{fleet}/releases/waves.yaml").read()
    waves = re.sub(r"(  canary:\n    release: )\S+", rf"\g<1>2026.12.{i}", waves)
    open(f"{fleet}/releases/waves.yaml", "w").write(waves)
    print(pin(src, "version: agent-baseline").split(":", 1)[1].strip())

def watch_pods_cm(ns, n, cm):
    """Until n pods of Agents in ns mount ConfigMap cm and are Running, Ready
    and not terminating. Prints the time."""
    ready = {}
    seen = False
    for pod in objects(["kubectl", "get", "pods", "-n", ns, "-l", "autonomic.sh/agent", "-w", "-o", "json"]):
        t = time.time()
        if not seen:
            seen = True
            print("ready", flush=True)
        agent = pod["metadata"]["labels"].get("autonomic.sh/agent")
        mounts = any((v.get("configMap") or {}).get("name") == cm for v in pod["spec"].get("volumes", []))
        st = pod.get("status") or {}
        ok = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
        if mounts and st.get("phase") == "Running" and ok and not pod["metadata"].get("deletionTimestamp"):
            ready[agent] = t
        if len(ready) >= int(n):
            print(f"{t:.3f}", flush=True)
            return

def baseline_summary(out):
    rows = [json.loads(l) for l in open(f"{out}/gitops-baseline.jsonl")]
    exo = [r for r in rows if r["side"] == "exo"]
    k = [r for r in rows if r["side"] == "kubectl"]
    me, mk = median([r["total"] for r in exo]), median([r["total"] for r in k])
    n = exo[0]["agents"] if exo else 0
    print(f"| baseline ConfigMap change in one tenant ({n} Agents mount it), {len(exo)} runs | Exo (commit, push, hook -> tenant Verified: every mounting pod rolled and its content hashed) | **{fmt(me, ' s', 2)}** | kubectl: apply the {n} re-pointed Agents -> every new pod Ready | **{fmt(mk, ' s', 2)}** | **{fmt(me / mk if me and mk else None, '', 2)}** |")
    print("runs: exo " + ", ".join(f"{r['total']:.2f}" for r in exo) + "; kubectl " + ", ".join(f"{r['total']:.2f}" for r in k))
    print("verify execs per exo run: " + ", ".join(f"{r['execs']:.0f}" for r in exo) + f" (Agents that mount the map: {n}; other tenants' Agents: {exo[0]['others'] if exo else 0})")
    print("pods re-created per exo run, in the tenant / elsewhere: " + ", ".join(f"{r['rolled']:.0f} / {r['rolled_elsewhere']:.0f}" for r in exo))

def pod_uids(p, out):
    """Every Agent pod's uid in the bench's tenant namespaces, by namespace/agent."""
    pods = json.loads(subprocess.run(["kubectl", "get", "pods", "-A", "-l", "autonomic.sh/agent", "-o", "json"],
                                     capture_output=True, text=True, check=True).stdout)["items"]
    uids = {f'{x["metadata"]["namespace"]}/{x["metadata"]["labels"]["autonomic.sh/agent"]}': x["metadata"]["uid"]
            for x in pods if x["metadata"]["namespace"].startswith(p + "-") and not x["metadata"].get("deletionTimestamp")}
    json.dump(uids, open(out, "w"))

def baseline_record(out, side, total, agents, before=None, after=None, ns=None, m_before=None, m_after=None, tenants=None):
    row = {"side": side, "total": float(total), "agents": int(agents)}
    if side == "exo":
        a, b = json.load(open(before)), json.load(open(after))
        changed = [k for k in a if b.get(k) != a[k]]
        row["rolled"] = sum(1 for k in changed if k.startswith(ns + "/"))
        row["rolled_elsewhere"] = len(changed) - row["rolled"]
        execs = lambda f: sum(v for _, v in samples(open(f).read(), "exo_operator_verify_execs_total"))
        row["execs"] = execs(m_after) - execs(m_before)
        row["others"] = (int(tenants) - 1) * int(agents)
    with open(f"{out}/gitops-baseline.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

def samples(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            yield dict(LABEL.findall(head)), float(value)

def cpu_ticks(pid):
    if not pid or not os.path.exists(f"/proc/{pid}/stat"):
        return None
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)

def snap(out, op_pid, op_addr, testenv_dir):
    """One snapshot of everything a steady window compares."""
    s = {"t": time.time(), "op_ticks": cpu_ticks(op_pid), "clk_tck": os.sysconf("SC_CLK_TCK")}
    for comp in ("kube-apiserver", "etcd"):
        try:
            s[f"{comp}_ticks"] = cpu_ticks(open(f"{testenv_dir}/pids/{comp}.pid").read().strip())
        except OSError:
            s[f"{comp}_ticks"] = None
    text = subprocess.run(["kubectl", "get", "--raw", "/metrics"], capture_output=True, text=True, check=True).stdout
    req = {}
    for l, v in samples(text, "apiserver_request_total"):
        k = f'{l.get("verb")} {l.get("resource") or "-"}{"/" + l["subresource"] if l.get("subresource") else ""}'
        req[k] = req.get(k, 0) + v
    s["apiserver"] = req
    s["watches_open"] = sum(v for l, v in samples(text, "apiserver_longrunning_requests") if l.get("verb") == "WATCH")
    s["op"] = None
    if op_addr:
        try:
            with urllib.request.urlopen(f"http://{op_addr}/metrics", timeout=10) as r:
                text = r.read().decode()
            s["op"] = {
                "writes": {f'{l["controller"]} {l["verb"]} {l["kind"]}': v for l, v in samples(text, "exo_operator_api_writes_total")},
                "execs": sum(v for _, v in samples(text, "exo_operator_live_check_execs_total")),
                "drift_reverted": sum(v for _, v in samples(text, "exo_operator_drift_reverted_total")),
                "content_drift": sum(v for _, v in samples(text, "exo_operator_content_drift_total")),
                "reconciles": sum(v for _, v in samples(text, "exo_operator_reconciles_total")),
            }
        except OSError:
            pass
    json.dump(s, open(out, "w"))

READS = ("GET", "LIST", "WATCH")

def foreign(p, out):
    """Until killed: every namespace or pod event outside the bench's
    namespaces (other users of the shared cluster), with its time."""
    import signal, threading
    procs = [spawn(["kubectl", "get", kind, *extra, "--watch-only", "--no-headers", "-o", f"custom-columns=N:{field}"])
             for kind, extra, field in (("ns", [], ".metadata.name"), ("pods", ["-A"], ".metadata.namespace"))]
    f = open(out, "w")
    lock = threading.Lock()
    def read(proc, kind):
        for line in proc.stdout:
            ns = line.strip()
            if ns and not ns.startswith(p + "-"):
                with lock:
                    f.write(f"{time.time():.3f} {kind} {ns}\n")
                    f.flush()
    def stop(*_):
        for proc in procs:
            proc.terminate()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    threads = [threading.Thread(target=read, args=(proc, kind), daemon=True) for proc, kind in zip(procs, ("ns", "pod"))]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)  # interruptible, unlike join(): SIGTERM ends the watch

def verbs_of(snap):
    v = {}
    for k, n in snap["apiserver"].items():
        v[k.split()[0]] = v.get(k.split()[0], 0) + n
    return v

def window(out, foreign_file, *snap_files):
    """The window from the first to the last snapshot, per minute; and, per
    verb, the median of the per-slice rates (a burst of other users'
    requests moves it little) with the slices other users were active in."""
    snaps = [json.load(open(f)) for f in snap_files]
    a, b = snaps[0], snaps[-1]
    secs = b["t"] - a["t"]
    per_min = lambda n: n * 60.0 / secs
    req = {k: b["apiserver"].get(k, 0) - a["apiserver"].get(k, 0) for k in b["apiserver"]}
    req = {k: v for k, v in req.items() if v}
    verbs = {}
    for k, v in req.items():
        verb = k.split()[0]
        verbs[verb] = verbs.get(verb, 0) + v
    events = [float(l.split()[0]) for l in open(foreign_file) if l.strip()]
    slices, noisy = {}, 0
    for x, y in zip(snaps, snaps[1:]):
        vx, vy = verbs_of(x), verbs_of(y)
        for verb in set(vx) | set(vy):
            slices.setdefault(verb, []).append((vy.get(verb, 0) - vx.get(verb, 0)) * 60.0 / (y["t"] - x["t"]))
        noisy += any(x["t"] <= t < y["t"] for t in events)
    w = {"secs": secs, "apiserver_per_min": {k: per_min(v) for k, v in sorted(verbs.items())},
         "apiserver_slice_median_per_min": {k: median(v) for k, v in sorted(slices.items())},
         "slices": len(snaps) - 1, "slices_with_other_users": noisy, "other_user_events": len(events),
         "apiserver_by_resource": dict(sorted(req.items(), key=lambda kv: -kv[1])),
         "watches_open": b["watches_open"]}
    def cpu(key):
        if a.get(key) is None or b.get(key) is None:
            return None
        return (b[key] - a[key]) / a["clk_tck"]
    for key in ("op", "kube-apiserver", "etcd"):
        c = cpu(f"{key}_ticks")
        w[f"{key}_cpu_s"] = c
        w[f"{key}_cpu_pct"] = None if c is None else 100.0 * c / secs
    if a.get("op") and b.get("op"):
        ow = {k: b["op"]["writes"].get(k, 0) - a["op"]["writes"].get(k, 0) for k in b["op"]["writes"]}
        w["op_writes"] = {k: v for k, v in ow.items() if v}
        w["op_writes_per_min"] = per_min(sum(ow.values()))
        for k in ("execs", "drift_reverted", "content_drift", "reconciles"):
            w[f"op_{k}"] = b["op"][k] - a["op"][k]
        w["op_execs_per_min"] = per_min(w["op_execs"])
    json.dump(w, open(out, "w"), indent=1)

def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)

def fmt(x, unit="", digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}{unit}"

def push_summary(out, runs):
    rows = [json.loads(l) for l in open(f"{out}/gitops-push.jsonl")]
    exo = [r for r in rows if r["side"] == "exo"]
    k = [r for r in rows if r["side"] == "kubectl"]
    me, mk = median([r["total"] for r in exo]), median([r["total"] for r in k])
    print(f"| push to verified, one Agent edit, {runs} runs | Exo (commit, push, signed hook -> tenant Verified at the commit) | **{fmt(me, ' s', 2)}** | kubectl apply --server-side -> new pod Running and Ready | **{fmt(mk, ' s', 2)}** | **{fmt(me / mk if me and mk else None, '', 2)}** |")
    print("runs: exo " + ", ".join(f"{r['total']:.2f}" for r in exo) + "; kubectl " + ", ".join(f"{r['total']:.2f}" for r in k))
    print("per-run ratios: " + ", ".join(f"{e['total'] / c['total']:.2f}" for e, c in zip(exo, k)))
    # Where Exo's time goes: medians of each phase over the runs.
    phases = {}
    for r in exo:
        for name, secs in r["phases"]:
            phases.setdefault(name, []).append(secs)
    print("Exo breakdown (median s): " + "; ".join(f"{n} {median(v):.2f}" for n, v in phases.items()))
    # What git's transport costs on this machine, which kubectl does not pay:
    # the commit and push, and a git CLI fetch of the same commit from the
    # same daemon (measured right after each run).
    if all("git_fetch" in r for r in exo):
        git = [r["t_push"] - r["t0"] + r["git_fetch"] for r in exo]
        rest = [r["total"] - g for r, g in zip(exo, git)]
        print(f"git transport floor (commit+push, and a git CLI fetch of the commit from the same daemon; median s): "
              f"{median(git):.2f} (fetch alone {median([r['git_fetch'] for r in exo]):.2f}); "
              f"Exo without it: {median(rest):.2f} s = {median(rest) / mk:.2f}x kubectl")
    for side in ("exo", "kubectl"):
        ws = [json.loads(l) for l in open(f"{out}/gitops-push-writes.jsonl") if json.loads(l)["side"] == side]
        if ws:
            typical = min(ws, key=lambda w: abs(w["total"] - median([x["total"] for x in ws])))
            print(f"verify execs per {side} edit (the saga's sha256sum into pods): " + ", ".join(f"{w.get('verify_execs', 0):.0f}" for w in ws))
            print(f"operator writes per {side} edit (median of runs {median([w['total'] for w in ws]):.0f}; run {typical['run']}): "
                  + ", ".join(f"{k} {v:.0f}" for k, v in sorted(typical["by"].items(), key=lambda kv: -kv[1])))
    print("kubectl breakdown (median s): apply returned " + fmt(median([r["apply"] for r in k]), "", 2) + "; pod Ready after " + fmt(median([r["total"] for r in k]), "", 2))

def exo_phases(events_file, t0, t_push, t_post, t_hook, t_done):
    """Exo's time split at what the watch saw (millisecond times, where the
    steps' own timestamps have whole seconds): the push, the hook, hook ->
    Rollout spec at the new commit (the sync), -> saga started, then each
    step until it was first seen Done."""
    evs = [json.loads(l) for l in open(events_file)]
    first_commit = evs[0]["commit"]
    phases = [("commit+push", t_push - t0), ("hook POST -> 202", t_hook - t_post)]
    last = t_hook
    spec = next((e for e in evs if e["commit"] != first_commit), None)
    if spec:
        phases.append(("hook -> Rollout spec (sync)", spec["t"] - last))
        last = spec["t"]
    started = next((e for e in evs if e["commit"] != first_commit and e["current"]), None)
    if started:
        phases.append(("spec -> saga started", started["t"] - last))
        last = started["t"]
        for name in [s["name"] for s in started["steps"]]:
            done = next((e["t"] for e in evs if e["t"] >= started["t"] and e["current"]
                         and any(s["name"] == name and s["state"] == "Done" for s in e["steps"])), None)
            if done is not None:
                phases.append((name, done - last))
                last = done
    phases.append(("last step -> watch done", t_done - last))
    return phases

def record(out, side, **kw):
    row = {"side": side, **kw}
    if side == "exo":
        row["phases"] = exo_phases(kw.pop("events"), kw["t0"], kw["t_push"], kw["t_post"], kw["t_hook"], kw["t_done"])
        row.pop("events", None)
    with open(f"{out}/gitops-push.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")

def writes(out, side, run, before, after):
    """The operator's writes (its own counter, by controller, verb and kind)
    from before one side's edit until 5 s after it was done."""
    count = lambda f: {f'{l["controller"]} {l["verb"]} {l["kind"]}': v
                       for l, v in samples(open(f).read(), "exo_operator_api_writes_total")}
    a, b = count(before), count(after)
    diff = {k: b[k] - a.get(k, 0) for k in b if b[k] != a.get(k, 0)}
    with open(f"{out}/gitops-push-writes.jsonl", "a") as f:
        # The Lease's renewals are counted too (by "Leader"), but they are
        # not the edit's: the total leaves them out.
        total = sum(v for k, v in diff.items() if not k.startswith("Leader "))
        execs = lambda f: sum(v for _, v in samples(open(f).read(), "exo_operator_verify_execs_total"))
        f.write(json.dumps({"side": side, "run": int(run), "total": total, "by": diff,
                            "verify_execs": execs(after) - execs(before)}) + "\n")

def add_analysis(path, interval):
    """Every built-in check on the `fleet` wave of the release at `path`
    (the wave past canary and low-risk: TENANTS - 2 tenants), each at
    `interval`, 200 measurements, tolerating any number of inconclusive
    ones (the bench has no circuit telemetry), so the run goes on for the
    whole window."""
    text = open(path).read()
    anchor = "    - name: fleet"
    assert anchor in text, f"{path}: no fleet wave"
    checks = ["crashloops", "restarts", "silentAgents", "contentDrift", "alerts", "circuitsOpen", "fallbackRate"]
    lines = ["      analysis:"]
    for c in checks:
        top = 1 if c == "fallbackRate" else 1000  # a ratio, 0 to 1
        extra = ", severity: warning" if c == "alerts" else ""
        lines.append(f"        - {{name: {c.lower()}, interval: {interval}, count: 200, inconclusiveLimit: 200, builtin: {c}, max: {top}{extra}}}")
    head, _, tail = text.partition(anchor)
    first, nl, rest = tail.partition("\n")
    open(path, "w").write(head + anchor + first + nl + "\n".join(lines) + "\n" + rest)

def run_state(out_file, ns):
    """The fleet wave's analysis run: its phase and measurements."""
    runs = json.loads(subprocess.run(["kubectl", "get", "ar", "-n", ns, "-o", "json"], capture_output=True, text=True, check=True).stdout)["items"]
    got = [{"name": r["metadata"]["name"], "phase": (r.get("status") or {}).get("phase"),
            "measurements": len((r.get("status") or {}).get("measurements") or []),
            "tenants": len(r["spec"]["tenants"]), "checks": len(r["spec"]["checks"])} for r in runs]
    open(out_file, "w").write(json.dumps(got) + "\n")
    print(json.dumps(got))

def steady_summary(out, floor_file, *names):
    """Per window: the operator's own figures, and the apiserver's requests
    per minute over the floor (operator stopped). The floor per verb is the
    median of its 30 s slices, which a burst of other users' requests moves
    little; its mean is shown too."""
    floor = json.load(open(floor_file))
    fmean, fv, fm = floor["apiserver_per_min"], floor["apiserver_slice_median_per_min"], floor["secs"] / 60.0
    fr = {k: v / fm for k, v in floor["apiserver_by_resource"].items()}
    noise = lambda w: f"{w['slices_with_other_users']} of {w['slices']} slices with other users' namespace or pod events ({w['other_user_events']})"
    print(f"floor (operator stopped, {floor['secs']:.0f} s; {noise(floor)}): apiserver requests/min, median of slices (mean): "
          + ", ".join(f"{k} {fv.get(k, 0):.1f} ({fmean.get(k, 0):.1f})" for k in sorted(set(fv) | set(fmean)))
          + f"; open watches {floor['watches_open']:.0f}; kube-apiserver CPU {fmt(floor['kube-apiserver_cpu_pct'], ' %')}, etcd {fmt(floor['etcd_cpu_pct'], ' %')}")
    print("| window | length | operator CPU | operator writes/min (own counter) | apiserver reads/min over the floor: GET / LIST / WATCH (window incl. floor) | other verbs/min over the floor | re-check execs/min |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        w = json.load(open(f"{out}/gitops-steady-{name}.json"))
        wv, wm = w["apiserver_per_min"], w["secs"] / 60.0
        reads = {v: wv.get(v, 0) - fv.get(v, 0) for v in READS}
        other = {k: wv.get(k, 0) - fv.get(k, 0) for k in sorted(set(wv) | set(fv)) if k not in READS}
        print(f"| {name} | {w['secs']:.0f} s | {fmt(w['op_cpu_s'], ' s')} ({fmt(w['op_cpu_pct'], ' %', 2)} of one core) "
              f"| {fmt(w.get('op_writes_per_min'), '', 2)} ({', '.join(f'{k} {v:.0f}' for k, v in w.get('op_writes', {}).items()) or 'none'}) "
              f"| {' / '.join(f'{reads[v]:.1f}' for v in READS)} ({' / '.join(f'{wv.get(v, 0):.1f}' for v in READS)}) "
              f"| {', '.join(f'{k} {v:+.1f}' for k, v in other.items() if abs(v) >= 0.05) or '0'} "
              f"| {fmt(w.get('op_execs_per_min'), '', 1)} ({w.get('op_execs', 0):.0f} execs) |")
        wr = {k: v / wm for k, v in w["apiserver_by_resource"].items()}
        diff = {k: wr.get(k, 0) - fr.get(k, 0) for k in set(wr) | set(fr)}
        top = sorted(((k, v) for k, v in diff.items() if abs(v) >= 0.1), key=lambda kv: -abs(kv[1]))[:16]
        print(f"   {name}: {noise(w)}; median of slices: " + ", ".join(f"{k} {v:.1f}" for k, v in w["apiserver_slice_median_per_min"].items()))
        print(f"   {name}: by verb and resource, per minute, window mean minus floor mean: " + ", ".join(f"{k} {v:+.1f}" for k, v in top))
        print(f"   {name}: open watches {w['watches_open']:.0f} (floor {floor['watches_open']:.0f}); kube-apiserver CPU {fmt(w['kube-apiserver_cpu_pct'], ' %')}, etcd {fmt(w['etcd_cpu_pct'], ' %')}; "
              f"drift reverted {w.get('op_drift_reverted', 0):.0f}, content drift {w.get('op_content_drift', 0):.0f}, Agent reconciles {w.get('op_reconciles', 0):.0f}")

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "record":
        side, out = args[0], args[1]
        kw = {}
        for a in args[2:]:
            k, _, v = a.partition("=")
            kw[k] = v if k == "events" else float(v)
        record(out, side, **kw)
    else:
        globals()[cmd.replace("-", "_")](*args)
PY
py() { python3 "$work/bench.py" "$@"; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
op_addr=; op_starts=0
start_operator() {
  op_addr=127.0.0.1:$(free_port)
  local n=$op_starts; op_starts=$((op_starts + 1))
  "$EXO" operator run --lease-namespace "$OPS" --fleet-namespace "$OPS" --metrics-addr "$op_addr" \
    --gitops-cache "$work/gitops" --rollout-poll-ms "$ROLLOUT_POLL_MS" > "$work/operator-$n.log" 2>&1 &
  op_pid=$!
  until curl -sf "http://$op_addr/readyz" >/dev/null; do
    kill -0 "$op_pid" 2>/dev/null || { log "the operator exited; see $work/operator-$n.log"; tail -5 "$work/operator-$n.log" >&2; exit 1; }
    sleep 0.2
  done
}
stop_operator() {
  [ -n "$op_pid" ] || return 0
  kill "$op_pid" 2>/dev/null || true
  wait "$op_pid" 2>/dev/null || true
  op_pid=; op_addr=
}

# Starts a watcher in the background (output in $1), waits until it has the
# object's current state, and sets $watch_pid.
watch_pid=
start_watch() {
  local out=$1; shift
  : > "$out"
  # python3 itself, not the `py` function: a function in the background is
  # a subshell, and killing that would leave the watch running.
  python3 "$work/bench.py" "$@" > "$out" &
  watch_pid=$!; bg_pids+=("$watch_pid")
  until grep -q ready "$out"; do
    kill -0 "$watch_pid" 2>/dev/null || { log "watch $* ended early"; exit 1; }
    sleep 0.05
  done
}
finish_watch() { # file timeout_s -> the watcher's result line
  local out=$1 deadline=$(( $(date +%s) + $2 ))
  while kill -0 "$watch_pid" 2>/dev/null; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "timed out after $2 s; last events: $(tail -c 600 "$out")"; exit 1; }
    sleep 0.05
  done
  wait "$watch_pid" 2>/dev/null || true
  tail -1 "$out"
}

rollouts_verified() { # commit: every tenant current, Verified, at a commit
  kubectl get ro -A -o json | python3 -c '
import json, sys
p, n = sys.argv[1], int(sys.argv[2])
ok = 0
for ro in json.load(sys.stdin)["items"]:
    if not ro["metadata"]["namespace"].startswith(p + "-") or ro["metadata"]["namespace"] in (p + "-exo", p + "-kubectl"):
        continue
    st = ro.get("status") or {}
    if (st.get("observedGeneration") == ro["metadata"].get("generation") and st.get("desiredHash") == ro["spec"].get("desiredHash")
            and st.get("phase") == "Verified" and st.get("appliedCommit") == ro["spec"]["commit"]):
        ok += 1
sys.exit(0 if ok == n else 1)' "$P" "$TENANTS"
}

# ------------------------------------------------------------------ set-up
pods_fit $(( TENANTS * AGENTS + AGENTS )) # the tenants' Agents and the kubectl side's
log "generating $TENANTS tenants x $AGENTS agents (prefix $P)"
py gen "$repo" "$work/fleet" "$TENANTS" "$AGENTS" "$EXO_TEST_REGISTRY" "$P"
bare="$EXO_TEST_GIT_ROOT/$P-fleet.git"
git -C "$work/fleet" init -q -b main
git -C "$work/fleet" config user.name bench; git -C "$work/fleet" config user.email bench@exo.invalid
git -C "$work/fleet" add -A
git -C "$work/fleet" commit -qm "bench fleet"
git clone -q --bare "$work/fleet" "$bare"
git -C "$work/fleet" remote add origin "$EXO_TEST_GIT_BASE/$P-fleet.git"
git -C "$work/fleet" fetch -q origin && git -C "$work/fleet" branch -q -u origin/main
(cd "$work/fleet" && "$EXO" release lint >/dev/null)

"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl create ns "$OPS" >/dev/null
# The hook key: random per invocation, kept in a file, never printed.
python3 -c 'import secrets; print(secrets.token_hex(32))' > "$work/token"; chmod 600 "$work/token"
kubectl create secret generic hook -n "$OPS" --from-file=token="$work/token" >/dev/null
fleet() { # interval reverifyInterval
  cat <<YAML | kubectl apply --server-side --field-manager bench -f - >/dev/null
apiVersion: autonomic.sh/v1alpha1
kind: Fleet
metadata: {name: bench, namespace: $OPS}
spec: {url: "$EXO_TEST_GIT_BASE/$P-fleet.git", allowInsecure: true, interval: $1, reverifyInterval: $2, webhookSecretRef: hook}
YAML
}
# Only the hook syncs; no live re-check during the push runs.
fleet 1h 1h

# The kubectl side's Agents: the same template, the same baselines, in a
# namespace that no Fleet manages.
kubectl create ns "$KNS" >/dev/null
"$EXO" config build --root "$work/fleet" | kubectl apply --server-side -n "$KNS" -f - >/dev/null
mkdir "$work/kubectl"
for f in "$work/fleet/manifests/$P-00"/*.yaml; do
  sed "s/^metadata:/metadata:\n  namespace: $KNS/" "$f" > "$work/kubectl/${f##*/}"
done
kagent() { cat "$work/kubectl/agent-$(printf %03d "$1").yaml"; } # index -> the Agent in $KNS
for a in $(seq 0 $((AGENTS - 1))); do kagent "$a"; echo "---"; done > "$work/kubectl-agents.yaml"
kubectl apply --server-side -f "$work/kubectl-agents.yaml" >/dev/null

start_operator
t0=$(now)
log "cold deploy: $((TENANTS * AGENTS)) agents through the operator, $AGENTS by kubectl"
until rollouts_verified; do sleep 1; done
cold=$(since "$t0")
until [ "$(kubectl get agents.autonomic.sh -n "$KNS" --no-headers 2>/dev/null | awk '$2 == "Active"' | wc -l)" -eq "$AGENTS" ]; do sleep 1; done
log "cold deploy verified in ${cold}s; kubectl agents Active after $(since "$t0")s"
echo "$cold" > "$OUT/gitops-cold.txt"

# ------------------------------------------------------------------ push
# Commits what changed in the fleet, pushes, and sends the signed hook for
# the commit. The sender is started before the clock (a git host's is
# already running). Sets t0 (before the commit), t_push, commit, and the
# hook's t_post and t_hook; a hook that is not answered 202 ends the bench.
push_with_hook() { # message
  local res status
  coproc HOOK { py hook "$op_addr" "$OPS" bench "$work/token"; }
  read -r res <&"${HOOK[0]}"
  t0=$(now)
  git -C "$work/fleet" add -A
  git -C "$work/fleet" commit -qm "$1"
  git -C "$work/fleet" push -q
  t_push=$(now)
  commit=$(git -C "$work/fleet" rev-parse HEAD)
  echo "$commit" >&"${HOOK[1]}"
  read -r status t_post t_hook <&"${HOOK[0]}"
  wait "$HOOK_PID" 2>/dev/null || true
  [ "$status" = 202 ] || { log "hook answered $status"; exit 1; }
}
exo_run() { # run
  local i=$1 tenant agent value t0 t_push t_post t_hook t_done commit status res
  tenant=$P-$(printf %02d $(( (i - 1) % TENANTS )))
  agent=agent-$(printf %03d $(( (37 * i) % AGENTS )))
  value="run-$i-$P"
  start_watch "$work/watch-exo-$i.out" watch-rollout "$tenant" "$OUT/gitops-exo-events-$i.jsonl"
  py edit "$work/fleet/manifests/$tenant/$agent.yaml" "$value"
  # The git transport's floor, measured after the run: the git CLI fetching
  # the pushed commit from the same daemon into a mirror of its own.
  if [ ! -d "$work/floor.git" ]; then
    git init -q --bare "$work/floor.git"
    git -C "$work/floor.git" fetch -q "$EXO_TEST_GIT_BASE/$P-fleet.git" +refs/heads/main:refs/remotes/origin/main
  fi
  push_with_hook "bench run $i: $tenant/$agent BENCH_EDIT=$value"
  res=$(finish_watch "$work/watch-exo-$i.out" 600)
  t_done=${res%% *}
  [ "${res#* }" = "$commit" ] || { log "tenant $tenant verified ${res#* }, pushed $commit"; exit 1; }
  t_fetch0=$(now)
  git -C "$work/floor.git" fetch -q "$EXO_TEST_GIT_BASE/$P-fleet.git" +refs/heads/main:refs/remotes/origin/main
  t_fetch=$(echo "$(now) - $t_fetch0" | bc)
  py record exo "$OUT" run="$i" total="$(echo "$t_done - $t0" | bc)" t0="$t0" t_push="$t_push" t_post="$t_post" t_hook="$t_hook" \
    t_done="$t_done" git_fetch="$t_fetch" events="$OUT/gitops-exo-events-$i.jsonl"
  log "run $i: exo $tenant/$agent verified at ${commit:0:12} after $(echo "$t_done - $t0" | bc)s"
}
kubectl_run() { # run
  local i=$1 a agent value t0 t_apply t_done
  a=$(( (37 * i) % AGENTS )); agent=agent-$(printf %03d "$a")
  value="run-$i-$P"
  kagent "$a" > "$work/kubectl-edit.yaml"
  py edit "$work/kubectl-edit.yaml" "$value"
  start_watch "$work/watch-k-$i.out" watch-pod "$KNS" "$agent" "$value"
  t0=$(now)
  kubectl apply --server-side -f "$work/kubectl-edit.yaml" >/dev/null
  t_apply=$(now)
  t_done=$(finish_watch "$work/watch-k-$i.out" 600)
  py record kubectl "$OUT" run="$i" total="$(echo "$t_done - $t0" | bc)" apply="$(echo "$t_apply - $t0" | bc)"
  log "run $i: kubectl $KNS/$agent Ready after $(echo "$t_done - $t0" | bc)s"
}
settle() { sleep 5; } # old pods finish terminating; the next side starts from quiet
side() { # exo|kubectl run: one timed side, then the operator's writes it caused
  curl -sf "http://$op_addr/metrics" > "$work/metrics-before"
  "${1}_run" "$2"
  settle
  curl -sf "http://$op_addr/metrics" > "$work/metrics-after"
  py writes "$OUT" "$1" "$2" "$work/metrics-before" "$work/metrics-after"
}

if [[ " $PHASES " == *" push "* ]]; then
  : > "$OUT/gitops-push.jsonl"; : > "$OUT/gitops-push-writes.jsonl"
  drift0=$(curl -sf "http://$op_addr/metrics" | awk '/^exo_operator_drift_reverted_total/ {s += $2} END {print s + 0}')
  for i in $(seq 1 "$RUNS"); do
    if [ $((i % 2)) -eq 1 ]; then side exo "$i"; side kubectl "$i"; else side kubectl "$i"; side exo "$i"; fi
  done
  # git and the cluster agree: every tenant verified at its commit, and the
  # kubectl side's edits caused no drift revert (they are outside git).
  until rollouts_verified; do sleep 1; done
  drift1=$(curl -sf "http://$op_addr/metrics" | awk '/^exo_operator_drift_reverted_total/ {s += $2} END {print s + 0}')
  log "push runs done; drift reverts during them: $((drift1 - drift0))"
  py push-summary "$OUT" "$RUNS" | tee "$OUT/gitops-push-summary.txt"
fi
# ------------------------------------------------------------------ baseline
# A baseline ConfigMap change in one tenant: a release that moves only the
# agent baseline to its other version, for the canary wave (tenant 00)
# alone. Exo rolls and hashes every pod that mounts it, and no other; the
# kubectl side re-points its Agents (the same template, the same maps) in
# one apply and waits for every new pod.
if [[ " $PHASES " == *" baseline "* ]]; then
  : > "$OUT/gitops-baseline.jsonl"
  canary=$P-00
  cm_of() { grep -m1 "version: agent-baseline" "$1" | awk '{print $2}'; }
  old_cm=$(cm_of "$work/fleet/releases/2026.11.0.yaml"); new_cm=$(cm_of "$work/fleet/releases/2026.11.1.yaml")
  for i in $(seq 1 "$BASELINE_RUNS"); do
    # Odd runs move to the 2026.11.1 baseline, even runs back.
    if [ $((i % 2)) -eq 1 ]; then from=2026.11.1; to_cm=$new_cm; else from=2026.11.0; to_cm=$old_cm; fi
    # Exo.
    py pod-uids "$P" "$work/uids-before.json"
    curl -sf "http://$op_addr/metrics" > "$work/metrics-before"
    start_watch "$work/watch-b-$i.out" watch-rollout "$canary" "$OUT/gitops-baseline-events-$i.jsonl"
    got=$(py baseline-release "$work/fleet" "$i" "$work/fleet/releases/$from.yaml")
    [ "$got" = "$to_cm" ] || { log "the release pins $got, not $to_cm"; exit 1; }
    push_with_hook "bench baseline run $i: the canary's agent baseline to $to_cm"
    res=$(finish_watch "$work/watch-b-$i.out" 900)
    [ "${res#* }" = "$commit" ] || { log "tenant $canary verified ${res#* }, pushed $commit"; exit 1; }
    total=$(echo "${res%% *} - $t0" | bc)
    settle
    curl -sf "http://$op_addr/metrics" > "$work/metrics-after"
    py pod-uids "$P" "$work/uids-after.json"
    py baseline-record "$OUT" exo "$total" "$AGENTS" "$work/uids-before.json" "$work/uids-after.json" "$canary" \
      "$work/metrics-before" "$work/metrics-after" "$TENANTS"
    log "baseline run $i: exo $canary verified on $to_cm after ${total}s"
    # kubectl.
    for a in $(seq 0 $((AGENTS - 1))); do kagent "$a" | sed "s/configMap: agent-baseline-.*/configMap: $to_cm/"; echo "---"; done > "$work/kubectl-baseline.yaml"
    start_watch "$work/watch-kb-$i.out" watch-pods-cm "$KNS" "$AGENTS" "$to_cm"
    t0=$(now)
    kubectl apply --server-side -f "$work/kubectl-baseline.yaml" >/dev/null
    t_done=$(finish_watch "$work/watch-kb-$i.out" 900)
    [[ "$t_done" =~ ^[0-9.]+$ ]] || { log "the kubectl side's pod watch ended without a result: $t_done"; exit 1; }
    total=$(echo "$t_done - $t0" | bc)
    py baseline-record "$OUT" kubectl "$total" "$AGENTS"
    log "baseline run $i: kubectl $KNS re-pointed to $to_cm, every pod Ready after ${total}s"
    settle
  done
  py baseline-summary "$OUT" | tee "$OUT/gitops-baseline-summary.txt"
fi
kubectl delete ns "$KNS" --wait=false >/dev/null
timeout 300 kubectl wait --for=delete ns "$KNS" --timeout=300s >/dev/null 2>&1 || true

# ------------------------------------------------------------------ steady
# Other users of the shared cluster show up in the apiserver's counters;
# count their pod events so a noisy window can be seen.
measure() { # name secs: a snapshot every SLICE_SECS over a window of $2 seconds
  local name=$1 secs=$2 fw i=0 end left
  python3 "$work/bench.py" foreign "$P" "$OUT/gitops-foreign-$name.txt" &
  fw=$!; bg_pids+=("$fw")
  sleep 2 # the foreign watch has listed
  end=$(( $(date +%s) + secs ))
  py snap "$work/snap-$name-0.json" "$op_pid" "$op_addr" "$EXO_TESTENV_DIR"
  log "steady: window $name, ${secs}s"
  while left=$(( end - $(date +%s) )); [ "$left" -gt 0 ]; do
    sleep $(( left < SLICE_SECS ? left : SLICE_SECS ))
    i=$((i + 1))
    py snap "$work/snap-$name-$i.json" "$op_pid" "$op_addr" "$EXO_TESTENV_DIR"
  done
  kill "$fw" 2>/dev/null || true
  py window "$OUT/gitops-steady-$name.json" "$OUT/gitops-foreign-$name.txt" $(seq -f "$work/snap-$name-%g.json" 0 "$i")
  log "steady: window $name: $(wc -l < "$OUT/gitops-foreign-$name.txt") namespace or pod events of other users"
}
if [[ " $PHASES " == *" steady "* ]]; then
  fleet "$STEADY_INTERVAL" 1h
  until rollouts_verified; do sleep 1; done
  stop_operator
  sleep 10 # the operator's last requests are counted
  measure floor "$FLOOR_SECS"
  start_operator
  until rollouts_verified; do sleep 1; done
  log "steady: operator restarted; settling ${SETTLE_SECS}s"
  sleep "$SETTLE_SECS"
  measure reverify-1h "$STEADY_SECS"
  # Every tenant was verified more than 10m ago: all re-check once at the
  # start of this window, then again 10 to 11 minutes later (jitter).
  fleet "$STEADY_INTERVAL" 10m
  measure reverify-10m "$STEADY_SECS"
  py steady-summary "$OUT" "$OUT/gitops-steady-floor.json" reverify-1h reverify-10m | tee "$OUT/gitops-steady-summary.txt"
fi
# ------------------------------------------------------------------ analysis
# The cost of a wave's analysis (issue 32): the fleet wave (TENANTS - 2
# tenants; 1000 Agents with TENANTS=12) gets every built-in check at
# ANALYSIS_INTERVAL, and a window of STEADY_SECS is measured while its run
# goes on, beside the floor and the reverify-1h window of the same run.
if [[ " $PHASES " == *" analysis "* ]]; then
  if [[ " $PHASES " != *" steady "* ]]; then
    fleet "$STEADY_INTERVAL" 1h
    until rollouts_verified; do sleep 1; done
    stop_operator
    sleep 10
    measure floor "$FLOOR_SECS"
    start_operator
    until rollouts_verified; do sleep 1; done
    log "analysis: operator restarted; settling ${SETTLE_SECS}s"
    sleep "$SETTLE_SECS"
    measure reverify-1h "$STEADY_SECS"
  else
    fleet "$STEADY_INTERVAL" 1h
  fi
  py add-analysis "$work/fleet/releases/2026.11.0.yaml" "$ANALYSIS_INTERVAL"
  (cd "$work/fleet" && "$EXO" release lint >&2)
  push_with_hook "analysis on the fleet wave"
  wait_until 120 "the fleet wave's analysis run" bash -c "kubectl get ar -n '$OPS' -o name | grep -q ."
  sleep "$SETTLE_SECS"
  measure analysis "$STEADY_SECS"
  py run-state "$OUT/gitops-analysis-run.json" "$OPS"
  py steady-summary "$OUT" "$OUT/gitops-steady-floor.json" reverify-1h analysis | tee "$OUT/gitops-analysis-summary.txt"
fi
log "results in $OUT/gitops-*"
