#!/usr/bin/env python3
"""Writes the kubewasm container image as an OCI image layout directory (oci-layout, index.json,
blobs/sha256/...) without a container engine: one gzipped layer holding the static binary, a CA
bundle and a passwd/group naming the non-root user it runs as.

Deterministic: entries sorted, owners and mtimes fixed ($SOURCE_DATE_EPOCH, default 0), gzip
without a name or time, so the same binary and labels give the same digests. Python's stdlib
only (the README already needs Python 3.11); a Go program would have to be built first.

    oci_image.py --binary PATH --ca-bundle PATH --version V [--revision SHA] OUT_DIR
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time

UID = GID = 65532  # distroless's "nonroot": a user no base image or host account is likely to own
BINARY = "usr/local/bin/kubewasm"
CA_BUNDLE = "etc/ssl/certs/ca-certificates.crt"
HOME = "home/nonroot"
SOURCE = "https://github.com/kubewasm/kubewasm"


def layer(binary: bytes, ca_bundle: bytes, mtime: int) -> bytes:
    """The root filesystem as a tar: parents before children, sorted, owners and times fixed."""
    passwd = b"root:x:0:0:root:/root:/sbin/nologin\n" \
             b"nonroot:x:%d:%d:nonroot:/%s:/sbin/nologin\n" % (UID, GID, HOME.encode())
    group = b"root:x:0:\nnonroot:x:%d:\n" % GID
    files = {
        BINARY: (binary, 0o755),
        CA_BUNDLE: (ca_bundle, 0o644),
        "etc/passwd": (passwd, 0o644),
        "etc/group": (group, 0o644),
    }
    # The home directory is the user's (the precompiled-plugin cache goes to ~/.cache); /tmp is
    # for tempfiles. Both are usually replaced by emptyDir volumes under a read-only root.
    dirs = {HOME: (UID, 0o700), "tmp": (0, 0o1777)}
    for path in list(files) + list(dirs):
        parent = os.path.dirname(path)
        while parent and parent not in dirs:
            dirs[parent] = (0, 0o755)
            parent = os.path.dirname(parent)

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(list(files) + list(dirs)):
            info = tarfile.TarInfo(path)
            info.mtime = mtime
            if path in dirs:
                owner, info.mode = dirs[path]
                info.type = tarfile.DIRTYPE
                info.uid = info.gid = owner
                tar.addfile(info)
            else:
                data, info.mode = files[path]
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def descriptor(media_type: str, blob: bytes) -> dict:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(blob).hexdigest(), "size": len(blob)}


def canonical(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_layout(out_dir: str, binary: bytes, ca_bundle: bytes, version: str, revision: str | None) -> str:
    """Writes the layout (replacing OUT_DIR whole) and returns the manifest's digest."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    tar = layer(binary, ca_bundle, epoch)
    gz = gzip.compress(tar, compresslevel=6, mtime=0)  # 9 takes 3x as long for <1% less
    labels = {
        "org.opencontainers.image.title": "kubewasm",
        "org.opencontainers.image.description": "A Kubernetes controller host that runs reconcile logic as sandboxed WebAssembly components",
        "org.opencontainers.image.source": SOURCE,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    config = canonical({
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)),
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": f"{UID}:{GID}",
            "Entrypoint": ["/" + BINARY],
            "Env": [
                "PATH=/usr/local/bin",
                "HOME=/" + HOME,
                "SSL_CERT_FILE=/" + CA_BUNDLE,
            ],
            "WorkingDir": "/" + HOME,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]},
        "history": [{"created_by": "scripts/oci_image.py"}],
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [descriptor("application/vnd.oci.image.layer.v1.tar+gzip", gz)],
        "annotations": {k: v for k, v in labels.items() if k.endswith((".source", ".version", ".revision"))},
    })
    manifest_desc = descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": version}
    index = canonical({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]})

    # Built beside OUT_DIR and swapped in, so a reader never sees half a layout.
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".image-", dir=parent)
    os.chmod(tmp, 0o755)
    blobs = os.path.join(tmp, "blobs", "sha256")
    os.makedirs(blobs)
    for blob in (gz, config, manifest):
        with open(os.path.join(blobs, hashlib.sha256(blob).hexdigest()), "wb") as f:
            f.write(blob)
    with open(os.path.join(tmp, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    with open(os.path.join(tmp, "index.json"), "wb") as f:
        f.write(index)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.rename(tmp, out_dir)
    return manifest_desc["digest"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--ca-bundle", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--revision")
    parser.add_argument("out_dir")
    args = parser.parse_args()
    with open(args.binary, "rb") as b, open(args.ca_bundle, "rb") as c:
        digest = write_layout(args.out_dir, b.read(), c.read(), args.version, args.revision)
    print(f"{args.out_dir} {digest}")


if __name__ == "__main__":
    main()
