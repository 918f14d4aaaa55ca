#!/usr/bin/env python3
"""Pushes the example fleet's images to an OCI registry over plain HTTP.

The images are tiny but real: a tar layer, an image config and an OCI
manifest (agent-runtime also gets a two-platform index). Every byte is
deterministic, so the digests pinned in releases/ stay valid on any machine.

usage: examples/images.py REGISTRY_HOST:PORT
"""
import hashlib
import io
import json
import sys
import tarfile
import urllib.request

IMAGES = {
    # repository: [tags]
    "exo/broker": ["1.4.0", "1.5.0"],
    "exo/router": ["2.0.0"],
    "exo/agentlet": ["0.9.0"],
    "exo/agent-runtime": ["3.1.0", "3.2.0"],
}
MULTI_ARCH = {"exo/agent-runtime"}


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer(repo: str, tag: str, arch: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        content = f"{repo}:{tag} ({arch})\n".encode()
        info = tarfile.TarInfo("etc/exo-image")
        info.size, info.mtime, info.mode = len(content), 0, 0o644
        tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def request(method: str, url: str, data: bytes = b"", content_type: str = "") -> urllib.request.addinfourl:
    req = urllib.request.Request(url, data=data if method in ("PUT", "POST") else None, method=method)
    if content_type:
        req.add_header("Content-Type", content_type)
    return urllib.request.urlopen(req, timeout=30)


def push_blob(base: str, repo: str, data: bytes) -> str:
    d = digest(data)
    try:
        request("HEAD", f"{base}/v2/{repo}/blobs/{d}")
        return d
    except urllib.error.HTTPError:
        pass
    loc = request("POST", f"{base}/v2/{repo}/blobs/uploads/").headers["Location"]
    if loc.startswith("/"):
        loc = base + loc
    sep = "&" if "?" in loc else "?"
    request("PUT", f"{loc}{sep}digest={d}", data, "application/octet-stream")
    return d


def push_manifest(base: str, repo: str, ref: str, body: bytes, media_type: str) -> str:
    request("PUT", f"{base}/v2/{repo}/manifests/{ref}", body, media_type)
    return digest(body)


def image(base: str, repo: str, tag: str, arch: str) -> tuple[str, int]:
    lay = layer(repo, tag, arch)
    config = json.dumps(
        {"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": [digest(lay)]}, "config": {}},
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": push_blob(base, repo, config), "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": push_blob(base, repo, lay), "size": len(lay)}],
        },
        sort_keys=True,
    ).encode()
    ref = tag if arch == "amd64" and repo not in MULTI_ARCH else f"{tag}-{arch}"
    return push_manifest(base, repo, ref, manifest, "application/vnd.oci.image.manifest.v1+json"), len(manifest)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    base = f"http://{sys.argv[1]}"
    for repo, tags in IMAGES.items():
        for tag in tags:
            if repo in MULTI_ARCH:
                entries = []
                for arch in ("amd64", "arm64"):
                    d, size = image(base, repo, tag, arch)
                    entries.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": size,
                                    "platform": {"architecture": arch, "os": "linux"}})
                index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                                    "manifests": entries}, sort_keys=True).encode()
                d = push_manifest(base, repo, tag, index, "application/vnd.oci.image.index.v1+json")
            else:
                d, _ = image(base, repo, tag, "amd64")
            print(f"{sys.argv[1]}/{repo}:{tag} {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
