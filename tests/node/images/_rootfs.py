"""Unpacked Debian root filesystems as image layers, for the image-template tests.

The tarballs come from ``tests/_debian_images.py`` (built once per machine with
mmdebstrap); each is unpacked once, as root (owners kept: root's, as an image store unpacks
them), into ``<cache>/<flavour>.layer``, without the device nodes mmdebstrap leaves in
``/dev`` (an image store neutralises those; sessions get the node's ``/dev``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._debian_images import cache_dir, debian_rootfs


def rootfs_layer(flavour: str) -> Path:
    """The unpacked layer of ``flavour``; skips the test where it cannot be had."""
    if os.geteuid() != 0:
        pytest.skip("unpacking a root filesystem with its owners needs root")
    tar = debian_rootfs(flavour)
    out = cache_dir() / f"{flavour}.layer"
    if out.is_dir():
        return out
    with open(cache_dir() / f"{flavour}.layer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.is_dir():
            return out
        partial = cache_dir() / f"{flavour}.layer.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(mode=0o755)
        done = subprocess.run(
            ["tar", "-x", "-f", str(tar), "-C", str(partial), "--exclude=./dev/*"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            pytest.skip(f"cannot unpack {tar}: {done.stderr.strip()[-400:]}")
        partial.rename(out)
    return out


def _sha256_of(path: Path) -> str:
    """The tarball's digest, remembered beside it (it is 150-300 MB)."""
    import hashlib

    memo = path.with_suffix(".sha256")
    if memo.exists() and memo.stat().st_mtime >= path.stat().st_mtime:
        return memo.read_text().strip()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = "sha256:" + h.hexdigest()
    memo.write_text(digest)
    return digest


def rootfs_layout(
    flavour: str,
    dest: Path,
    *,
    config: dict[str, object] | None = None,
    extra_layers: tuple[bytes, ...] = (),
    tag: str = "v1",
) -> Path:
    """An OCI image layout at ``dest``: the Debian root filesystem of ``flavour`` as its
    first layer (the tarball, uncompressed, linked in when it can be), then ``extra_layers``
    (uncompressed tars), with ``config`` as the image config's ``config`` object."""
    import hashlib
    import json

    tar = debian_rootfs(flavour)
    blobs = dest / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    base = _sha256_of(tar)
    try:
        os.link(tar, blobs / base[7:])
    except OSError:
        shutil.copyfile(tar, blobs / base[7:])
    layers = [(base, tar.stat().st_size)]
    for data in extra_layers:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (blobs / digest[7:]).write_bytes(data)
        layers.append((digest, len(data)))

    def put(doc: dict[str, object]) -> tuple[str, int]:
        raw = json.dumps(doc, sort_keys=True).encode()
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        (blobs / digest[7:]).write_bytes(raw)
        return digest, len(raw)

    cfg_digest, cfg_size = put(
        {
            "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                os.uname().machine, "amd64"
            ),
            "os": "linux",
            "config": config or {},
            "rootfs": {"type": "layers", "diff_ids": [d for d, _ in layers]},
        }
    )
    layer_type = "application/vnd.oci.image.layer.v1.tar"
    manifest_digest, manifest_size = put(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": cfg_digest,
                "size": cfg_size,
            },
            "layers": [{"mediaType": layer_type, "digest": d, "size": n} for d, n in layers],
        }
    )
    (dest / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest_size,
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    (dest / "index.json").write_text(json.dumps(index))
    return dest


def tar_layer(files: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    """An uncompressed layer tar of ``files`` (root-owned, mode 0644 unless ``modes`` says)."""
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for name in sorted(files):
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                folder = "/".join(parts[:i])
                if folder not in dirs:
                    dirs.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            info.mode = (modes or {}).get(name, 0o644)
            tar.addfile(info, io.BytesIO(files[name]))
    return out.getvalue()
