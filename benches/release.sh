#!/usr/bin/env bash
# Fixed-workload benchmarks for the offline half of `exo release`, each side
# by side in the same run with what a user would do instead.
#
#  1. pin: resolve 200 image refs (20 repositories x 10 tags) against the
#     loopback registry with `exo release pin`, versus a `skopeo inspect`
#     loop over the same refs; and the same 200 HEAD requests from one
#     curl process, 16 at once (what a general HTTP client takes for the
#     requests alone).
#  2. config build: hash and render 64 baseline folders of 1 MiB each with
#     `exo config build`, versus `sha256sum` over the same files.
#
# Needs the test environment (`scripts/testenv up`). Prints hyperfine's
# tables and writes JSON next to them in $OUT (default target/bench).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
set -a; eval "$(scripts/testenv env)"; set +a
OUT=${OUT:-$repo/target/bench}
mkdir -p "$OUT"
# EXO_BIN: a release binary built beforehand (default: build one here).
if [ -n "${EXO_BIN:-}" ]; then EXO=$EXO_BIN; else
  cargo build --release --quiet
  EXO=$repo/target/release/exo
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

echo "== pushing 200 tags to $EXO_TEST_REGISTRY" >&2
python3 benches/push_tags.py "$EXO_TEST_REGISTRY" bench "$work/refs"

mkdir -p "$work/fleet/releases"
{
  printf 'apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata:\n  name: bench\nspec:\n  components:\n'
  i=0; while read -r ref; do printf '    - name: c%d\n      layer: capability\n      image: %s\n' "$i" "$ref"; i=$((i+1)); done < "$work/refs"
  printf '  waves: []\n'
} > "$work/unpinned.yaml"
cat > "$work/skopeo-loop.sh" <<SH
#!/usr/bin/env bash
while read -r ref; do skopeo inspect --tls-verify=false --no-tags --format '{{.Digest}}' "docker://\$ref" >/dev/null; done < "$work/refs"
SH
chmod +x "$work/skopeo-loop.sh"

hyperfine -N --warmup 1 --runs 10 --export-json "$OUT/pin-exo.json" \
  --prepare "cp $work/unpinned.yaml $work/fleet/releases/bench.yaml" \
  -n "exo release pin (200 refs)" "$EXO release pin --root $work/fleet" >&2
hyperfine --runs 3 --export-json "$OUT/pin-skopeo.json" \
  -n "skopeo inspect loop (200 refs)" "$work/skopeo-loop.sh" >&2
urls=$(sed 's#^\([^/]*\)/\(.*\):\([^:]*\)$#http://\1/v2/\2/manifests/\3#' "$work/refs" | tr '\n' ' ')
hyperfine -N --warmup 1 --runs 10 --export-json "$OUT/pin-curl.json" \
  -n "curl: 200 HEAD, 16 in flight" \
  "curl -s -o /dev/null -I --parallel --parallel-max 16 -H 'Accept: application/vnd.oci.image.manifest.v1+json' $urls" >&2

echo "== config build: 64 folders x 1 MiB" >&2
mkdir -p "$work/cm/configmaps"
python3 - "$work/cm/configmaps" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(42)
for f in range(64):
    d = os.path.join(root, f"baseline-{f:02d}")
    os.makedirs(d)
    for n in range(16):
        with open(os.path.join(d, f"file-{n:02d}.md"), "w") as fh:
            fh.write("".join(rnd.choice("abcdefghij klmnop\n") for _ in range(64 * 1024 - 64)))
PY
mb=$(du -sm "$work/cm/configmaps" | cut -f1)
hyperfine --warmup 1 --runs 10 --export-json "$OUT/config-exo.json" \
  -n "exo config build (${mb} MiB)" "$EXO config build --root $work/cm -o $work/cm/out" >&2
hyperfine --warmup 1 --runs 10 --export-json "$OUT/config-sha256sum.json" \
  -n "sha256sum (${mb} MiB)" "find $work/cm/configmaps -type f -print0 | xargs -0 sha256sum >/dev/null" >&2

python3 - "$OUT" "$mb" <<'PY'
import json, sys
out, mb = sys.argv[1], int(sys.argv[2])
def med(name):
    return json.load(open(f"{out}/{name}.json"))["results"][0]["median"]
exo, sko, floor = med("pin-exo"), med("pin-skopeo"), med("pin-curl")
cexo, csha = med("config-exo"), med("config-sha256sum")
print(f"| pin 200 refs | exo release pin | {exo*1000:.0f} ms | skopeo inspect loop | {sko*1000:.0f} ms | {exo/sko:.3f} |")
print(f"| pin 200 refs | exo release pin | {exo*1000:.0f} ms | curl --parallel, the 200 HEAD requests alone | {floor*1000:.0f} ms | {exo/floor:.2f} |")
print(f"| config build {mb} MiB | exo config build | {cexo*1000:.0f} ms ({mb/cexo:.0f} MB/s) | sha256sum | {csha*1000:.0f} ms ({mb/csha:.0f} MB/s) | {cexo/csha:.2f} |")
PY
