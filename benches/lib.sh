# Shared set-up of the bench scripts (sourced, not run): the repository and
# the test environment's variables, OUT (the results folder), work (a
# scratch folder), EXO (a private copy of the binary: EXO_BIN, or a release
# build), and the log helpers.
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
