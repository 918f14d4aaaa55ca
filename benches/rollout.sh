#!/usr/bin/env bash
# Fixed-workload benchmark of a wave rollout: 1000 Agents (10 tenants x 100)
# move between the example releases through canary -> low-risk -> fleet, with
# no soak time.
#
#   Exo:            `exo release rollout <release>` on the tenants of a fleet
#                   repository the operator follows (promotion commits, sagas
#                   with verified postconditions incl. one exec per Agent,
#                   per wave);
#   kubectl waves:  the same change by hand on as many Agents of the same
#                   template in other namespaces, which no Fleet manages (so
#                   the operator does not revert them as drift): per wave,
#                   one `kubectl apply --server-side` of the wave's ConfigMaps
#                   and re-pointed Agents, then a `kubectl rollout
#                   status`-style loop until every pod of the wave runs the
#                   new image and is Ready;
#   kubectl floor:  all of those Agents at once: one apply of every
#                   ConfigMap and Agent, no waves, no checks, then the same
#                   wait for every pod. The least a rollout can take on this
#                   cluster; the goal is Exo within 1.1x of it (reported, not
#                   asserted).
#
# The three sides use the same operator to turn Agents into pods and run one
# after another, never together. Exo alternates direction (2026.11.0 <->
# 2026.11.1); the kubectl Agents go there and back in each run, waves first in
# odd runs and the floor first in even ones, so each side sees both
# directions. Writes $OUT/rollout-runs.jsonl and $OUT/rollout-summary.txt.
#
# Needs the test environment (`scripts/testenv up`). Knobs: TENANTS (10),
# AGENTS (100 per tenant), RUNS (3), WAIT_SECS (1200: the longest any one wait
# may take before the bench gives up, naming it), ROLLOUT_POLL_MS (200),
# EXO_BIN (a built binary instead of `cargo build --release`).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
TENANTS=${TENANTS:-10}; AGENTS=${AGENTS:-100}; RUNS=${RUNS:-3}
WAIT_SECS=${WAIT_SECS:-1200}; ROLLOUT_POLL_MS=${ROLLOUT_POLL_MS:-200}
# The canary and low-risk waves take one tenant each, and a wave that selects
# no tenant fails `exo release lint`.
[ "$TENANTS" -ge 3 ] || { log "TENANTS must be at least 3: one each for canary and low-risk, one or more for fleet"; exit 1; }
# Fresh names each invocation: re-creating namespaces of the same names while
# the garbage collector still tracks the old objects makes it delete the new
# pods.
P=r$(date +%s | tail -c 6)
OPS=$P-exo                                       # the Fleet and the Lease
tenants=$(seq -f "$P-%02g" 0 $((TENANTS - 1)))   # in git, rolled out by Exo
ktenants=$(seq -f "$P-k%02g" 0 $((TENANTS - 1))) # outside git, by kubectl
op_pid=; op_addr=

cleanup() {
  set +e
  log "cleaning up: deleting the bench namespaces"
  kubectl delete fleet -n "$OPS" bench --wait=false >/dev/null 2>&1
  # The operator must run while the namespaces go: it removes the Agents'
  # finalizers.
  [ -n "$op_pid" ] || start_operator >/dev/null 2>&1
  # shellcheck disable=SC2086
  kubectl delete ns $tenants $ktenants --wait=false >/dev/null 2>&1
  # shellcheck disable=SC2086
  timeout 300 kubectl wait --for=delete ns $tenants $ktenants --timeout=300s >/dev/null 2>&1
  stop_operator
  kubectl delete ns "$OPS" --wait=false >/dev/null 2>&1
  rm -rf "$EXO_TEST_GIT_ROOT/$P-fleet.git"
  cat "$work"/operator-*.log > "$OUT/rollout-operator.log" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# ------------------------------------------------------------------ helpers
# Python side: fleet generation, rendering a release's Agents as the saga
# would apply them, the cold-deploy check and the summary.
cat > "$work/bench.py" <<'PY'
import glob, json, os, re, shutil, statistics, sys

def gen(repo, dst, tenants, agents, registry, p):
    shutil.copytree(f"{repo}/configmaps", f"{dst}/configmaps")
    os.makedirs(f"{dst}/releases")
    for f in os.listdir(f"{repo}/releases"):
        text = open(f"{repo}/releases/{f}").read()
        text = text.replace("[platform]", f"[{p}-00]").replace("[acme]", f"[{p}-01]")
        open(f"{dst}/releases/{f}", "w").write(text.replace("127.0.0.1:25000/", f"{registry}/"))
    template = open(f"{repo}/manifests/acme/assistant.yaml").read().replace("127.0.0.1:25000/", f"{registry}/")
    for t in range(int(tenants)):
        d = f"{dst}/manifests/{p}-{t:02d}"
        os.makedirs(d)
        for a in range(int(agents)):
            open(f"{d}/agent-{a:03d}.yaml", "w").write(template.replace("name: assistant", f"name: agent-{a:03d}"))

def in_ns(doc, ns):
    """The object of one block-style YAML document, in namespace ns."""
    assert re.search(r"^metadata:\n", doc, re.M), f"not a block-style object: {doc[:80]!r}"
    return re.sub(r"^metadata:\n", f"metadata:\n  namespace: {ns}\n", doc, count=1, flags=re.M)

def render(root, release, src, cms_file, out, *namespaces):
    """One file to apply: the ConfigMaps, then the Agents of tenant folder src
    at the release's images and baselines, for each namespace. ConfigMaps
    first: the pods mount them."""
    rel = open(f"{root}/releases/{release}.yaml").read()
    imgs = dict(re.findall(r"image: (\S+)@(sha256:[0-9a-f]{64})", rel))
    cms = dict(re.findall(r"- name: (\S+)\n\s+version: (\S+)", rel))
    agents = []
    for f in sorted(glob.glob(f"{root}/manifests/{src}/*.yaml")):
        text = open(f).read()
        text = re.sub(r"image: (\S+)@(sha256:[0-9a-f]{64})", lambda m: f"image: {m.group(1)}@{imgs.get(m.group(1), m.group(2))}", text)
        text = re.sub(r"configMap: (agent-baseline|platform-baseline)-[0-9a-f]{10}", lambda m: f"configMap: {cms[m.group(1)]}", text)
        agents.append(text)
    cm_docs = [d for d in re.split(r"^---\s*$", open(cms_file).read(), flags=re.M) if d.strip()]
    docs = [in_ns(d.strip("\n") + "\n", ns) for ns in namespaces for d in cm_docs]
    docs += [in_ns(a, ns) for ns in namespaces for a in agents]
    open(out, "w").write("---\n".join(docs))

def verified(release, *namespaces):
    """Exit 0 when each namespace's Rollout (JSON list on stdin) is current,
    Verified and at the release."""
    want, ok = set(namespaces), set()
    for ro in json.load(sys.stdin)["items"]:
        ns, st = ro["metadata"]["namespace"], ro.get("status") or {}
        if (ns in want and ro["spec"].get("release") == release and st.get("phase") == "Verified"
                and st.get("observedGeneration") == ro["metadata"].get("generation")
                and st.get("desiredHash") == ro["spec"].get("desiredHash")):
            ok.add(ns)
    sys.exit(0 if ok == want else 1)

def summary(out, tenants, agents, cold, drift_k, drift_log):
    rows = [json.loads(l) for l in open(f"{out}/rollout-runs.jsonl")]
    med = lambda k: statistics.median(r[k] for r in rows)
    me, mw, mf = med("exo"), med("waves"), med("floor")
    n = int(tenants) * int(agents)
    runs = lambda k: ", ".join(f"{r[k]:.1f}" for r in rows)
    print(f"| rollout, {n} Agents, canary -> low-risk -> fleet, no soak, RUNS={len(rows)} | exo release rollout | **{me:.1f} s** "
          f"| kubectl, per wave: apply --server-side + wait | {mw:.1f} s | kubectl floor: one apply of all + wait | {mf:.1f} s "
          f"| exo/floor **{me / mf:.2f}** | exo/waves {me / mw:.2f} |")
    print(f"runs (s): exo {runs('exo')}; kubectl waves {runs('waves')}; kubectl floor {runs('floor')}")
    print("directions: " + "; ".join(f"run {r['run']}: exo -> {r['exo_to']}, waves -> {r['waves_to']}, floor -> {r['floor_to']}" for r in rows))
    print("per-run ratios: exo/floor " + ", ".join(f"{r['exo'] / r['floor']:.2f}" for r in rows)
          + "; exo/waves " + ", ".join(f"{r['exo'] / r['waves']:.2f}" for r in rows))
    print(f"goal exo <= 1.10 x floor: median ratio {me / mf:.2f} ({'within' if me / mf <= 1.10 else 'over'})")
    print(f"cold deploy of {n} Agents in git and {n} by kubectl through the operator: {float(cold):.1f} s")
    print(f"drift reverts during the kubectl sides: {drift_k} (must be 0); 'drift reverted' lines in the operator log: {drift_log}")

if __name__ == "__main__":
    globals()[sys.argv[1]](*sys.argv[2:])
PY
py() { python3 "$work/bench.py" "$@"; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
op_starts=0
op_up() { curl -sf "http://$op_addr/readyz" >/dev/null || { kill -0 "$op_pid" 2>/dev/null || { log "the operator exited; see $OUT/rollout-operator.log"; exit 1; }; false; }; }
start_operator() {
  op_addr=127.0.0.1:$(free_port)
  local n=$op_starts; op_starts=$((op_starts + 1))
  "$EXO" operator run --lease-namespace "$OPS" --fleet-namespace "$OPS" --metrics-addr "$op_addr" \
    --gitops-cache "$work/gitops" --rollout-poll-ms "$ROLLOUT_POLL_MS" > "$work/operator-$n.log" 2>&1 &
  op_pid=$!
  wait_until 120 "the operator to be ready (http://$op_addr/readyz)" op_up
}
stop_operator() {
  [ -n "$op_pid" ] || return 0
  kill "$op_pid" 2>/dev/null || true
  wait "$op_pid" 2>/dev/null || true
  op_pid=; op_addr=
}
drift_reverts() {
  local m
  m=$(curl -sf "http://$op_addr/metrics") || { log "could not read the operator's metrics (http://$op_addr/metrics)"; return 1; }
  awk '/^exo_operator_drift_reverted_total/ {s += $2} END {print s + 0}' <<< "$m"
}

runtime_of() { grep -A3 'name: agent-runtime' "$work/fleet/releases/$1.yaml" | sed -n 's/.*image: //p' | head -1; }
other() { [ "$1" = 2026.11.0 ] && echo 2026.11.1 || echo 2026.11.0; }
# The waves of the releases: canary (the first tenant), low-risk (the
# second), fleet (the rest).
waves() { # namespaces... -> one wave per line
  local first=$1 second=$2; shift 2
  printf '%s\n%s\n%s\n' "$first" "$second" "$*"
}
# rollout-status-style: at least $2 agent pods in the namespaces run image $1,
# are Ready and not terminating.
pods_on() { # image count namespace...
  local image=$1 n=$2; shift 2
  [ "$(kubectl get pods -A -l app.kubernetes.io/component=agent -o jsonpath='{range .items[*]}{.metadata.namespace} {.spec.containers[?(@.name=="runtime")].image} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk -v img="$image" -v w=" $* " 'index(w, " " $1 " ") && $2 == img && $3 == "True" && $4 == ""' | wc -l)" -ge "$n" ]
}
# Nothing left over from the side before: every bench Agent has exactly one
# pod, none terminating.
quiet() {
  [ "$(kubectl get pods -A -l app.kubernetes.io/component=agent -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk -v p="$P-" 'index($1, p) == 1' | wc -l)" -eq $((2 * TENANTS * AGENTS)) ]
}
exo_verified() { kubectl get ro -A -o json | py verified "$1" $tenants; } # release

# ------------------------------------------------------------------ set-up
pods_fit $(( 2 * TENANTS * AGENTS )) # the tenants' Agents and the kubectl side's
log "generating $TENANTS tenants x $AGENTS agents (prefix $P), and as many outside git"
py gen "$repo" "$work/fleet" "$TENANTS" "$AGENTS" "$EXO_TEST_REGISTRY" "$P"
bare="$EXO_TEST_GIT_ROOT/$P-fleet.git"
git -C "$work/fleet" init -q -b main
git -C "$work/fleet" config user.name bench; git -C "$work/fleet" config user.email bench@exo.invalid
git -C "$work/fleet" add -A
git -C "$work/fleet" commit -qm "bench fleet"
git clone -q --bare "$work/fleet" "$bare"
git -C "$work/fleet" remote add origin "$EXO_TEST_GIT_BASE/$P-fleet.git"
git -C "$work/fleet" fetch -q origin && git -C "$work/fleet" branch -q -u origin/main
(cd "$work/fleet" && "$EXO" release lint > "$work/lint.txt") || { cat "$work/lint.txt" >&2; exit 1; }

# The kubectl side's files, rendered ahead so that its clock measures
# kubectl and the cluster, not Python: per release, one file per wave and
# one of everything (the floor).
"$EXO" config build --root "$work/fleet" > "$work/cms.yaml"
mkdir "$work/k"
for release in 2026.11.0 2026.11.1; do
  w=0
  # shellcheck disable=SC2086
  while read -r wave; do
    py render "$work/fleet" "$release" "$P-00" "$work/cms.yaml" "$work/k/$release-wave-$w.yaml" $wave
    w=$((w + 1))
  done < <(waves $ktenants)
  # shellcheck disable=SC2086
  py render "$work/fleet" "$release" "$P-00" "$work/cms.yaml" "$work/k/$release-all.yaml" $ktenants
done

"$EXO" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
kubectl create ns "$OPS" >/dev/null
cat <<YAML | kubectl apply --server-side --field-manager bench -f - >/dev/null
apiVersion: autonomic.sh/v1alpha1
kind: Fleet
metadata: {name: bench, namespace: $OPS}
spec: {url: "$EXO_TEST_GIT_BASE/$P-fleet.git", allowInsecure: true, interval: 5s}
YAML
# shellcheck disable=SC2086
for ns in $ktenants; do kubectl create ns "$ns" >/dev/null; done
kubectl apply --server-side -f "$work/k/2026.11.0-all.yaml" >/dev/null

start_operator
t0=$(now)
log "cold deploy of 2026.11.0: $((TENANTS * AGENTS)) Agents in git, $((TENANTS * AGENTS)) by kubectl"
wait_until "$WAIT_SECS" "every tenant in git Verified at 2026.11.0 (cold deploy)" exo_verified 2026.11.0
# shellcheck disable=SC2086
wait_until "$WAIT_SECS" "every kubectl Agent's pod Ready on 2026.11.0 (cold deploy)" \
  pods_on "$(runtime_of 2026.11.0)" $((TENANTS * AGENTS)) $ktenants
cold=$(since "$t0")
log "cold deploy done in ${cold}s"

# ------------------------------------------------------------------ sides
# Each sets $secs to its wall time.
secs=
exo_side() { # run release
  local i=$1 release=$2 start
  git -C "$work/fleet" pull -q --ff-only
  start=$(now)
  # --timeout bounds each wave; `timeout` the whole (3 waves and the pushes).
  if ! (cd "$work/fleet" && timeout $((3 * WAIT_SECS + 120)) "$EXO" release rollout "$release" --timeout "${WAIT_SECS}s" \
    > "$OUT/rollout-cli-$i.log" 2>&1); then
    log "run $i: exo release rollout $release failed or did not end within its timeouts; last lines of $OUT/rollout-cli-$i.log:"
    tail -5 "$OUT/rollout-cli-$i.log" >&2
    exit 1
  fi
  secs=$(printf '%.3f' "$(since "$start")")
  # Where the time went: every tenant's saga steps with their timestamps.
  kubectl get ro -A -o json > "$OUT/rollout-status-$i.json"
}
waves_side() { # release: per wave, one apply, then wait for its pods
  local release=$1 image start w=0 wave
  image=$(runtime_of "$release")
  not_on "$release"
  start=$(now)
  while read -r wave; do
    kubectl apply --server-side -f "$work/k/$release-wave-$w.yaml" >/dev/null
    # shellcheck disable=SC2086
    wait_until "$WAIT_SECS" "wave $w ($wave) of the kubectl Agents Ready on $release" \
      pods_on "$image" $(($(wc -w <<< "$wave") * AGENTS)) $wave
    w=$((w + 1))
  done < <(waves $ktenants)
  secs=$(printf '%.3f' "$(since "$start")")
}
floor_side() { # release: one apply of everything, then wait for every pod
  local release=$1 start
  not_on "$release"
  start=$(now)
  kubectl apply --server-side -f "$work/k/$release-all.yaml" >/dev/null
  # shellcheck disable=SC2086
  wait_until "$WAIT_SECS" "every kubectl Agent's pod Ready on $release (floor)" \
    pods_on "$(runtime_of "$release")" $((TENANTS * AGENTS)) $ktenants
  secs=$(printf '%.3f' "$(since "$start")")
}
# A side that starts where it should end would measure nothing.
not_on() { # release
  # shellcheck disable=SC2086
  ! pods_on "$(runtime_of "$1")" 1 $ktenants || { log "bench bug: kubectl Agents already on $1 before the side"; exit 1; }
}
settle() { wait_until "$WAIT_SECS" "the old pods to finish terminating" quiet; }

# Exo's tenants alternate between the releases; the kubectl Agents start
# each run at 2026.11.0 (kcur), go to 2026.11.1 and come back.
current=2026.11.0; kcur=2026.11.0; knext=$(other "$kcur")
: > "$OUT/rollout-runs.jsonl"
drift_k=0
for i in $(seq 1 "$RUNS"); do
  target=$(other "$current")
  log "run $i: exo release rollout $target"
  exo_side "$i" "$target"; exo_s=$secs
  log "run $i: exo ${exo_s}s"
  settle
  d0=$(drift_reverts)
  if [ $((i % 2)) -eq 1 ]; then
    log "run $i: kubectl per wave to $knext"; waves_side "$knext"; waves_s=$secs; waves_to=$knext
    log "run $i: kubectl waves ${waves_s}s"; settle
    log "run $i: kubectl floor back to $kcur"; floor_side "$kcur"; floor_s=$secs; floor_to=$kcur
  else
    log "run $i: kubectl floor to $knext"; floor_side "$knext"; floor_s=$secs; floor_to=$knext
    log "run $i: kubectl floor ${floor_s}s"; settle
    log "run $i: kubectl per wave back to $kcur"; waves_side "$kcur"; waves_s=$secs; waves_to=$kcur
  fi
  settle
  d1=$(drift_reverts); d=$((d1 - d0)); drift_k=$((drift_k + d))
  [ "$d" -eq 0 ] || log "run $i: WARNING: the operator reverted $d drifts during the kubectl sides"
  log "run $i: exo ${exo_s}s, kubectl waves ${waves_s}s, kubectl floor ${floor_s}s"
  printf '{"run": %d, "exo": %s, "waves": %s, "floor": %s, "exo_to": "%s", "waves_to": "%s", "floor_to": "%s"}\n' \
    "$i" "$exo_s" "$waves_s" "$floor_s" "$target" "$waves_to" "$floor_to" >> "$OUT/rollout-runs.jsonl"
  current=$target
done

drift_log=$(cat "$work"/operator-*.log | grep -c "drift reverted" || true)
py summary "$OUT" "$TENANTS" "$AGENTS" "$cold" "$drift_k" "$drift_log" | tee "$OUT/rollout-summary.txt"
log "results in $OUT/rollout-*"
