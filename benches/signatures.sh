#!/usr/bin/env bash
# Fixed-workload benchmark of image signature checks (issue 33), side by side
# in the same run with what a user would do instead:
#
#   200 image refs (20 repositories x 10 tags, as benches/release.sh pushes
#   them), each signed by the real cosign (key-based, no transparency log);
#   then
#     Exo:    `exo release pin --verify-signatures` of a release naming the
#             200 refs and the key: it resolves every tag and verifies every
#             image's signature (one process, one pooled client, 16 in
#             flight);
#     cosign: `cosign verify --key ... --insecure-ignore-tlog` in a loop over
#             the same 200 refs (by digest), what a pipeline does today;
#     floor:  the same requests Exo makes (a HEAD per tag, then a GET of
#             each signature manifest and of each signed payload: 600 in
#             all), from one curl process, 16 at once: what the registry
#             takes to answer them, with no verifying at all.
#
# Needs the test environment (`scripts/testenv up`, which builds cosign).
# Knobs: RUNS (10), COSIGN_RUNS (3), EXO_BIN (a release build; default:
# `cargo build --release`). Prints hyperfine's tables; JSON in $OUT.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-10}; COSIGN_RUNS=${COSIGN_RUNS:-3}
trap 'rm -rf "$work"' EXIT
COSIGN=${EXO_TEST_COSIGN:?run scripts/testenv up (it builds cosign)}
[ -x "$COSIGN" ] || { log "$COSIGN is not executable: run scripts/testenv up"; exit 1; }

log "pushing 200 tags to $EXO_TEST_REGISTRY"
python3 benches/push_tags.py "$EXO_TEST_REGISTRY" bench-sig "$work/refs" "$work/digests"

log "a cosign key pair, and each image signed unless it verifies already"
(cd "$work" && COSIGN_PASSWORD= "$COSIGN" generate-key-pair >/dev/null 2>&1)
cosign_env=(env COSIGN_PASSWORD= TUF_ROOT="$work/tuf")
t0=$(now)
while read -r ref; do
  "${cosign_env[@]}" "$COSIGN" sign --key "$work/cosign.key" --tlog-upload=false --allow-http-registry --yes "$ref" >/dev/null 2>&1 ||
    { log "cosign sign $ref failed"; exit 1; }
done < "$work/digests"
log "signed 200 images in $(since "$t0")s"

mkdir -p "$work/fleet/releases"
{
  printf 'apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata:\n  name: bench\nspec:\n  components:\n'
  i=0; while read -r ref; do printf '    - name: c%d\n      layer: capability\n      image: %s\n' "$i" "$ref"; i=$((i+1)); done < "$work/refs"
  printf '  waves: []\n  signatures:\n    keys:\n      - name: bench\n        publicKey: |\n'
  sed 's/^/          /' "$work/cosign.pub"
} > "$work/unpinned.yaml"
cat > "$work/cosign-loop.sh" <<SH
#!/usr/bin/env bash
set -e
while read -r ref; do
  ${cosign_env[*]} "$COSIGN" verify --key "$work/cosign.pub" --insecure-ignore-tlog --allow-http-registry "\$ref" >/dev/null 2>&1
done < "$work/digests"
SH
chmod +x "$work/cosign-loop.sh"
# The floor's 600 URLs: each tag's HEAD, each signature manifest, each payload.
python3 - "$EXO_TEST_REGISTRY" "$work/refs" "$work/digests" "$work/urls" <<'PY'
import json, sys, urllib.request
reg, refs, digests, out = sys.argv[1:5]
urls = []
for ref, dig in zip(open(refs).read().split(), open(digests).read().split()):
    repo, tag = ref[len(reg) + 1:].rsplit(":", 1)
    hexd = dig.rsplit("sha256:", 1)[1]
    sig = f"http://{reg}/v2/{repo}/manifests/sha256-{hexd}.sig"
    m = json.load(urllib.request.urlopen(urllib.request.Request(sig, headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})))
    urls.append(("HEAD", f"http://{reg}/v2/{repo}/manifests/{tag}"))
    urls.append(("GET", sig))
    for layer in m["layers"]:
        urls.append(("GET", f"http://{reg}/v2/{repo}/blobs/{layer['digest']}"))
with open(out, "w") as f:
    for method, url in urls:
        f.write(f"{method} {url}\n")
PY
heads=$(awk '$1 == "HEAD" {printf "%s ", $2}' "$work/urls")
gets=$(awk '$1 == "GET" {printf "%s ", $2}' "$work/urls")
cat > "$work/curl-floor.sh" <<SH
#!/usr/bin/env bash
accept='Accept: application/vnd.oci.image.manifest.v1+json'
curl -s -o /dev/null -I --parallel --parallel-max 16 -H "\$accept" $heads
curl -s -o /dev/null --parallel --parallel-max 16 -H "\$accept" $gets
SH
chmod +x "$work/curl-floor.sh"

# Once, to show it verifies (and what it prints).
cp "$work/unpinned.yaml" "$work/fleet/releases/bench.yaml"
"$EXO" release pin --verify-signatures --root "$work/fleet" >&2
hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$OUT/signatures-exo.json" \
  --prepare "cp $work/unpinned.yaml $work/fleet/releases/bench.yaml" \
  -n "exo release pin --verify-signatures (200 refs)" "$EXO release pin --verify-signatures --root $work/fleet" >&2
hyperfine --runs "$COSIGN_RUNS" --export-json "$OUT/signatures-cosign.json" \
  -n "cosign verify loop (200 refs)" "$work/cosign-loop.sh" >&2
hyperfine --warmup 1 --runs "$RUNS" --export-json "$OUT/signatures-curl.json" \
  -n "curl: the same 600 requests, 16 in flight" "$work/curl-floor.sh" >&2
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
med = lambda n: json.load(open(f"{out}/signatures-{n}.json"))["results"][0]["median"] * 1000
e, c, f = med("exo"), med("cosign"), med("curl")
print(f"exo pin --verify-signatures {e:.0f} ms | cosign verify loop {c:.0f} ms | ratio {e / c:.3f} | floor (curl, 600 requests) {f:.0f} ms | exo / floor {e / f:.2f}")
PY
