# Shared set-up of the bench scripts (sourced, not run): the repository and
# the test environment's variables, OUT (the results folder), work (a
# scratch folder), EXO (a private copy of the binary: EXO_BIN, or a release
# build), the log helpers and wait_until (a wait with a deadline).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
OUT=${OUT:-${CARGO_TARGET_DIR:-$repo/target}/bench}; mkdir -p "$OUT"
work=$(mktemp -d)
if [ -z "${EXO_BIN:-}" ]; then
  cargo build --release --quiet
  EXO_BIN=${CARGO_TARGET_DIR:-$repo/target}/release/exo
fi
# A private copy: the target dir may be shared, and another build must not
# swap the binary under a running bench.
cp "$EXO_BIN" "$work/exo"
EXO=$work/exo
log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
# wait_until SECS WHAT CMD...: runs CMD every 0.2 s until it succeeds. After
# SECS seconds it ends the bench, naming WHAT: a bench ends, it never hangs.
# Call it from the main shell, not from $(...): the exit must end the bench.
wait_until() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$(($(date +%s) + secs))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "timed out after ${secs}s waiting for $what"; exit 1; }
    sleep 0.2
  done
}
# pods_fit N: ends the bench unless the cluster's nodes have room for N more
# pods (the test environment's kwok nodes hold 2000 each): a run that cannot
# fit stalls at the nodes' capacity instead of measuring.
pods_fit() {
  local need=$1 room running
  room=$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.allocatable.pods}{"\n"}{end}' |
    awk '{v = $1; if (v ~ /k$/) { sub(/k$/, "", v); v *= 1000 } s += v} END {print s + 0}')
  running=$(kubectl get pods -A --no-headers 2>/dev/null | wc -l)
  if [ $((room - running)) -lt "$need" ]; then
    log "the cluster's nodes hold $room pods, $running are there, and this run needs $need more: bring the test environment up with more nodes (scripts/testenv down; EXO_TESTENV_NODES=$(( (need + running + 1999) / 2000 )) scripts/testenv up)"
    exit 1
  fi
}
