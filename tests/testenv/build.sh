#!/usr/bin/env bash
# Builds the test environment's binaries from pinned Go modules and caches
# them by version, so a second run (or a fresh clone on the same machine)
# reuses them. Prints the folder holding the binaries on stdout; progress goes
# to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=cosign/versions.env
. "$here/cosign/versions.env"

# The key covers the pinned versions and every Go source here, so editing the
# provisioner or a main package rebuilds, and nothing else does.
src_hash=$(cd "$here" && find . -name '*.go' -o -name 'go.mod' -o -name 'go.sum' -o -name '*.sh' -o -name 'versions.env' -o -name '*.patch' \
  | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
key="k8s-${K8S_VERSION}_kwok-${KWOK_VERSION}_gitea-${GITEA_VERSION}_cosign-${COSIGN_VERSION}_${src_hash}"
cache_root=${EXO_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/exo/testenv}
out="$cache_root/$key"

log() { printf '[testenv build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ -f "$out/.complete" ]; then
  log "cache hit: $out"
  echo "$out"
  exit 0
fi

export GOFLAGS=-mod=mod
start=$(date +%s)

# Each component is built into a cache folder of its own, keyed by its own
# inputs, so editing the provisioner or the kwok patch rebuilds only that
# piece; `out` is then assembled from them with hard links.
part_hash() { (cd "$here" && find "$@" -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12); }
part() { printf '%s/parts/%s' "$cache_root" "$1"; }

# go build -v names each package as it compiles; show a running count so a
# cold build (many minutes) visibly makes progress.
progress() {
  awk -v what="$1" '{ n++; if (n % 200 == 0) { printf "[testenv build] %s: %d packages compiled\n", what, n > "/dev/stderr"; fflush("/dev/stderr") } }
       END { printf "[testenv build] %s: %d packages compiled\n", what, n > "/dev/stderr" }'
}

kube=$(part "kube-${K8S_VERSION}_$(part_hash kube versions.env)")
if [ ! -f "$kube/.complete" ]; then
  log "kube-apiserver, kube-controller-manager, kube-scheduler ${K8S_VERSION} and etcd (cold: about 8 minutes on 2 cores)"
  rm -rf "$kube" && mkdir -p "$kube/bin"
  (
    cd "$here/kube"
    K8S_VERSION=$K8S_VERSION ./gen-gomod.sh
    go mod tidy
    minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=${K8S_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor} -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    go build -v -ldflags "$ldflags" -o "$kube/bin/" ./cmd/... 2>&1 | progress "control plane"
    test "${PIPESTATUS[0]}" -eq 0
  )
  touch "$kube/.complete"
fi

# kwok from its module source with the patches in kwok/ applied (see each
# patch's header for why).
kwok=$(part "kwok-${KWOK_VERSION}_$(part_hash kwok versions.env)")
if [ ! -f "$kwok/.complete" ]; then
  log "kwok ${KWOK_VERSION}, patched: $(cd "$here/kwok" && ls ./*.patch | tr '\n' ' ')"
  rm -rf "$kwok" && mkdir -p "$kwok/bin"
  kwok_dir=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  src="$kwok/src"
  cp -r "$kwok_dir" "$src" && chmod -R u+w "$src"
  for p in "$here"/kwok/*.patch; do (cd "$src" && patch -s -p1 < "$p"); done
  (cd "$src" && go build -v -ldflags "-s -w" -o "$kwok/bin/kwok" ./cmd/kwok 2>&1 | progress kwok; test "${PIPESTATUS[0]}" -eq 0)
  cp -r "$src/kustomize/stage" "$kwok/kwok-stage"
  rm -rf "$src"
  touch "$kwok/.complete"
fi

prov=$(part "provisioner_$(part_hash provisioner)")
if [ ! -f "$prov/.complete" ]; then
  log "hostPath provisioner"
  rm -rf "$prov" && mkdir -p "$prov/bin"
  (cd "$here/provisioner" && go build -v -ldflags "-s -w" -o "$prov/bin/provisioner" . 2>&1 | progress provisioner; test "${PIPESTATUS[0]}" -eq 0)
  touch "$prov/.complete"
fi

# Gitea, the forge the tenant-review tests open pull requests on, from its
# Go module through the wrapper module in gitea/ (see its go.mod). No cgo,
# so no SQLite: it runs on the testenv's PostgreSQL. Built without the
# bindata tag it reads options/ and templates/ from disk; they are copied
# into the part, so a cleaned module cache does not break it.
gitea=$(part "gitea-${GITEA_VERSION}_$(part_hash gitea versions.env)")
if [ ! -f "$gitea/.complete" ]; then
  log "gitea ${GITEA_VERSION} (cold: about 6 minutes on 2 cores, downloads included)"
  rm -rf "$gitea" && mkdir -p "$gitea/bin"
  gitea_start=$(date +%s)
  (
    cd "$here/gitea"
    export GOFLAGS=-mod=readonly
    grep -q "^require code.gitea.io/gitea ${GITEA_VERSION}\$" go.mod \
      || { log "gitea/go.mod does not require code.gitea.io/gitea ${GITEA_VERSION} (versions.env)"; exit 1; }
    gomod=$(go mod download -json "code.gitea.io/gitea@${GITEA_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    replaces() { sed -n 's,^replace \([^ ]*\) => \([^ ]*\) \([^ ]*\).*,\1 \2 \3,p' "$1" | LC_ALL=C sort; }
    [ "$(replaces "$gomod")" = "$(replaces go.mod)" ] \
      || { log "gitea/go.mod's replace lines differ from those of Gitea ${GITEA_VERSION} ($gomod)"; exit 1; }
    CGO_ENABLED=0 go build -v -trimpath -ldflags "-s -w -X main.Version=${GITEA_VERSION#v}" \
      -o "$gitea/bin/gitea" code.gitea.io/gitea 2>&1 | progress gitea
    test "${PIPESTATUS[0]}" -eq 0
    dir=$(go mod download -json "code.gitea.io/gitea@${GITEA_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    mkdir -p "$gitea/share"
    cp -r "$dir/options" "$dir/templates" "$gitea/share/"
    chmod -R u+w,a+rX "$gitea/share"
  )
  touch "$gitea/.complete"
  log "gitea built in $(( $(date +%s) - gitea_start ))s"
fi

# cosign, for signing images in the tests, the demo and scripts/image, and
# for `cosign verify` beside exo's own check (tests/image_signatures.rs, the
# benchmark). `go install` of the module at its version: its own go.mod and
# go.sum pin every dependency (it has no replace lines).
cosign=$(part "cosign-${COSIGN_VERSION}_$(part_hash cosign)")
if [ ! -f "$cosign/.complete" ]; then
  log "cosign ${COSIGN_VERSION} (cold: about 5 minutes on 2 cores, downloads included)"
  rm -rf "$cosign" && mkdir -p "$cosign/bin"
  cosign_start=$(date +%s)
  (GOBIN="$cosign/bin" CGO_ENABLED=0 go install -v -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=${COSIGN_VERSION}" \
      "github.com/sigstore/cosign/v2/cmd/cosign@${COSIGN_VERSION}" 2>&1 | progress cosign
    test "${PIPESTATUS[0]}" -eq 0)
  touch "$cosign/.complete"
  log "cosign built in $(( $(date +%s) - cosign_start ))s"
fi

rm -rf "$out" && mkdir -p "$out/bin"
for b in kube-apiserver kube-controller-manager kube-scheduler etcd; do ln -f "$kube/bin/$b" "$out/bin/$b"; done
ln -f "$kwok/bin/kwok" "$out/bin/kwok"
cp -r "$kwok/kwok-stage" "$out/kwok-stage"
ln -f "$prov/bin/provisioner" "$out/bin/provisioner"
ln -f "$gitea/bin/gitea" "$out/bin/gitea"
ln -f "$cosign/bin/cosign" "$out/bin/cosign"
cp -r "$gitea/share" "$out/gitea-share"

for b in kube-apiserver kube-controller-manager kube-scheduler etcd kwok provisioner gitea cosign; do
  [ -x "$out/bin/$b" ] || { log "missing $out/bin/$b after build"; exit 1; }
done
touch "$out/.complete"
log "built in $(( $(date +%s) - start ))s; $(du -sh "$out" | cut -f1) in $out"
echo "$out"
