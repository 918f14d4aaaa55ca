#!/usr/bin/env python3
"""The file work of scripts/image, on the standard library alone.

  image.py version CARGO_TOML
      prints the package version.
  image.py layout --binary EXO --out DIR --tag TAG --revision SHA --cargo-toml PATH
      writes an OCI image layout to DIR and prints the manifest's digest.
  image.py pin --name NAME --digest sha256:... KUSTOMIZATION...
      sets each kustomization's `images:` entry for `exo` to NAME@digest.

The image holds the binary at /exo (the entrypoint), the shared libraries
`ldd` says it loads (the real files, at the paths the loader asks for), the
CA bundle, /etc/passwd and /etc/group naming user 65532 `nonroot`, an
nsswitch.conf, /tmp and nonroot's home; no shell. Two layers: the runtime
(libraries, certificates, /etc; the same across commits, so an upgrade pulls
only the binary again) and the binary.

Every byte follows from the inputs: entries sorted, owners and modes fixed,
mtime SOURCE_DATE_EPOCH for the binary's layer (the runtime's: its newest
host file's), gzip without a name or time, JSON with sorted keys.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
NONROOT = 65532
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"

PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnonroot:x:65532:\n"
# glibc's default without this file asks DNS before /etc/hosts.
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"


class Entry:
    """One tar member: a folder, or a file with its content."""

    def __init__(self, path, mode, data=None, owner=0):
        self.path, self.mode, self.data, self.owner = path.strip("/"), mode, data, owner


def shared_libraries(binary):
    """The files the dynamic loader maps for `binary`, as `ldd` lists them."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        if "not found" in line:
            sys.exit(f"image.py: {binary} needs a library that is not installed: {line.strip()}")
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            paths.append(m.group(1))
    if not paths:
        sys.exit(f"image.py: ldd lists no libraries for {binary}; is it dynamically linked?")
    return sorted(set(paths))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def file_mode(path):
    """0755 for anything executable on the host, else 0644."""
    return 0o755 if os.stat(path).st_mode & 0o111 else 0o644


def with_parents(entries):
    """Adds the folders the entries sit in (root-owned, 0755) and sorts."""
    by_path = {e.path: e for e in entries}
    for e in entries:
        parts = e.path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            by_path.setdefault("/".join(parts[:i]), Entry("/".join(parts[:i]), 0o755))
    return [by_path[p] for p in sorted(by_path)]


def tar_bytes(entries, mtime):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for e in with_parents(entries):
            info = tarfile.TarInfo(e.path)
            info.mtime, info.mode = mtime, e.mode
            info.uid = info.gid = e.owner
            info.uname = info.gname = ""
            if e.data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
    return buf.getvalue()


def runtime_entries(libraries):
    entries = [Entry(p, file_mode(p), read(os.path.realpath(p))) for p in libraries]
    entries += [
        Entry(CA_BUNDLE, 0o644, read(CA_BUNDLE)),
        Entry("/etc/passwd", 0o644, PASSWD.encode()),
        Entry("/etc/group", 0o644, GROUP.encode()),
        Entry("/etc/nsswitch.conf", 0o644, NSSWITCH.encode()),
        Entry("/tmp", 0o1777),
        Entry("/home/nonroot", 0o700, owner=NONROOT),
    ]
    return entries


def newest_mtime(paths):
    return max(int(os.stat(os.path.realpath(p)).st_mtime) for p in paths)


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def package(cargo_toml):
    with open(cargo_toml, "rb") as f:
        return tomllib.load(f)["package"]


def cmd_version(args):
    print(package(args.cargo_toml)["version"])


def cmd_layout(args):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    pkg = package(args.cargo_toml)
    labels = {
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.description": pkg.get("description", ""),
        "org.opencontainers.image.licenses": pkg.get("license", ""),
        "org.opencontainers.image.revision": args.revision,
        "org.opencontainers.image.source": pkg.get("repository", ""),
        "org.opencontainers.image.title": pkg["name"],
        "org.opencontainers.image.version": pkg["version"],
    }
    libraries = shared_libraries(args.binary)
    # The runtime layer's mtime is its newest host file's (as the packages
    # installed them), not the commit's: the layer stays the same from
    # commit to commit, so an upgrade pulls only the binary's.
    layers = [
        ("runtime: shared libraries, CA certificates, /etc", runtime_entries(libraries),
         newest_mtime([CA_BUNDLE, *libraries])),
        ("the exo binary", [Entry("/exo", 0o755, read(args.binary))], epoch),
    ]
    blobs = {}

    def blob(data):
        d = sha256(data)
        blobs[d] = data
        return {"digest": d, "size": len(data)}

    diff_ids, descriptors, history = [], [], []
    for what, entries, mtime in layers:
        raw = tar_bytes(entries, mtime)
        diff_ids.append(sha256(raw))
        descriptors.append({"mediaType": LAYER, **blob(gzip.compress(raw, compresslevel=9, mtime=0))})
        history.append({"created": created, "created_by": f"scripts/image: {what}"})
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": f"{NONROOT}:{NONROOT}",
            "Entrypoint": ["/exo"],
            "Env": [f"SSL_CERT_FILE={CA_BUNDLE}"],
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": history,
    }
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, **blob(canonical(config))},
        "layers": descriptors,
        "annotations": labels,
    })
    ref = {"mediaType": MANIFEST, **blob(manifest), "annotations": {"org.opencontainers.image.ref.name": args.tag}}
    os.makedirs(os.path.join(args.out, "blobs", "sha256"), exist_ok=True)
    for d, data in blobs.items():
        with open(os.path.join(args.out, "blobs", "sha256", d.split(":", 1)[1]), "wb") as f:
            f.write(data)
    with open(os.path.join(args.out, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    with open(os.path.join(args.out, "index.json"), "wb") as f:
        f.write(canonical({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                           "manifests": [ref]}))
    size = sum(d["size"] for d in descriptors)
    print(f"image.py: {len(layers)} layers, {size / 1e6:.1f} MB compressed", file=sys.stderr)
    print(ref["digest"])


def pinned_block(name, digest):
    return f"images:\n  - name: exo\n    newName: {name}\n    digest: {digest}\n"


def cmd_pin(args):
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", args.digest):
        sys.exit(f"image.py: {args.digest!r} is not a sha256 digest")
    for path in args.kustomizations:
        with open(path) as f:
            text = f.read()
        # The `images:` block runs to the next top-level key or the end.
        block = re.compile(r"^images:\n(?:[ \t-].*\n)*", re.M)
        if not block.search(text):
            sys.exit(f"image.py: {path} has no top-level images: block to pin")
        text = block.sub(lambda _: pinned_block(args.name, args.digest), text, count=1)
        with open(path, "w") as f:
            f.write(text)


def main():
    p = argparse.ArgumentParser(prog="image.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("version")
    v.add_argument("cargo_toml")
    v.set_defaults(run=cmd_version)
    lay = sub.add_parser("layout")
    for flag in ("--binary", "--out", "--tag", "--revision", "--cargo-toml"):
        lay.add_argument(flag, required=True)
    lay.set_defaults(run=cmd_layout)
    pin = sub.add_parser("pin")
    pin.add_argument("--name", required=True)
    pin.add_argument("--digest", required=True)
    pin.add_argument("kustomizations", nargs="+")
    pin.set_defaults(run=cmd_pin)
    args = p.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
