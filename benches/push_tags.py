#!/usr/bin/env python3
"""Pushes 200 tiny images (20 repositories x 10 tags) to a registry over
plain HTTP, for the pin and signature benchmarks.

usage: benches/push_tags.py REGISTRY PREFIX REFS_OUT [DIGESTS_OUT]

Repositories are PREFIX/component-NN, tags 1.T.0; REFS_OUT gets one
REGISTRY/repo:tag a line, DIGESTS_OUT (if given) the same images as
REGISTRY/repo@sha256:... in the same order.
"""
import hashlib
import json
import sys
import urllib.request

reg, prefix, out = sys.argv[1], sys.argv[2], sys.argv[3]
out_digests = sys.argv[4] if len(sys.argv) > 4 else None
base = f"http://{reg}"


def put(url, data, ctype):
    req = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": ctype})
    urllib.request.urlopen(req, timeout=30)


def blob(repo, data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    req = urllib.request.Request(f"{base}/v2/{repo}/blobs/uploads/", data=b"", method="POST")
    loc = urllib.request.urlopen(req, timeout=30).headers["Location"]
    loc = loc if loc.startswith("http") else base + loc
    put(f"{loc}{'&' if '?' in loc else '?'}digest={d}", data, "application/octet-stream")
    return d, len(data)


refs, digests = [], []
for r in range(20):
    repo = f"{prefix}/component-{r:02d}"
    for t in range(10):
        layer = f"{repo}:{t}".encode()
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        (cd, cs), (ld, ls) = blob(repo, cfg), blob(repo, layer)
        m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
                        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": ls}]}).encode()
        put(f"{base}/v2/{repo}/manifests/1.{t}.0", m, "application/vnd.oci.image.manifest.v1+json")
        refs.append(f"{reg}/{repo}:1.{t}.0")
        digests.append(f"{reg}/{repo}@sha256:" + hashlib.sha256(m).hexdigest())
with open(out, "w") as f:
    f.write("\n".join(refs) + "\n")
if out_digests:
    with open(out_digests, "w") as f:
        f.write("\n".join(digests) + "\n")
