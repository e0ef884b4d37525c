"""Small OCI images written from Python: layouts, archives, and their blobs.

A layer is a dict of path -> bytes made into a tar, optionally gzip'd or zstd'd.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from collimate_rl.node.images.manifest import (
    OCI_CONFIG,
    OCI_INDEX,
    OCI_LAYER,
    OCI_LAYER_GZIP,
    OCI_LAYER_ZSTD,
    OCI_MANIFEST,
)

COMPRESSIONS = {"tar": OCI_LAYER, "gzip": OCI_LAYER_GZIP, "zstd": OCI_LAYER_ZSTD}


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def compress(data: bytes, how: str) -> bytes:
    if how == "tar":
        return data
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    if how == "zstd":
        zstd = shutil.which("zstd")
        if zstd is None:
            import pytest

            pytest.skip("the zstd command is missing (apt-get install zstd)")
        return subprocess.run(
            [zstd, "-q", "-c"], input=data, capture_output=True, check=True
        ).stdout
    raise ValueError(how)


@dataclass
class Layer:
    files: dict[str, bytes]
    how: str = "gzip"
    diff: bytes = field(init=False)
    blob: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.diff = tar_of(self.files)
        self.blob = compress(self.diff, self.how)

    @property
    def digest(self) -> str:
        return sha(self.blob)

    def descriptor(self) -> dict[str, object]:
        return {"mediaType": COMPRESSIONS[self.how], "digest": self.digest, "size": len(self.blob)}


@dataclass
class Image:
    layers: list[Layer]
    arch: str = "amd64"
    cmd: list[str] = field(default_factory=lambda: ["/bin/app"])
    env: list[str] = field(default_factory=lambda: ["PATH=/usr/bin:/bin"])

    @property
    def config(self) -> bytes:
        doc = {
            "architecture": self.arch,
            "os": "linux",
            "config": {"Env": self.env, "Cmd": self.cmd, "WorkingDir": "/app"},
            "rootfs": {"type": "layers", "diff_ids": [sha(layer.diff) for layer in self.layers]},
        }
        return json.dumps(doc, sort_keys=True).encode()

    @property
    def manifest(self) -> bytes:
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": OCI_CONFIG,
                "digest": sha(self.config),
                "size": len(self.config),
            },
            "layers": [layer.descriptor() for layer in self.layers],
        }
        return json.dumps(doc, sort_keys=True).encode()

    @property
    def digest(self) -> str:
        return sha(self.manifest)

    def blobs(self) -> dict[str, bytes]:
        out = {sha(self.config): self.config, self.digest: self.manifest}
        out.update({layer.digest: layer.blob for layer in self.layers})
        return out


def index_of(images: dict[str, Image]) -> bytes:
    """An OCI index over images keyed by "os/arch[/variant]"."""
    entries = []
    for plat, image in images.items():
        parts = plat.split("/")
        platform = {"os": parts[0], "architecture": parts[1]}
        if len(parts) > 2:
            platform["variant"] = parts[2]
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": image.digest,
                "size": len(image.manifest),
                "platform": platform,
            }
        )
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()


def write_layout(root: Path, tagged: dict[str, Image | dict[str, Image]]) -> Path:
    """An OCI layout at root with each tag naming an image or a multi-platform index."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    entries = []
    for tag, item in tagged.items():
        images = item if isinstance(item, dict) else {"": item}
        for image in images.values():
            for digest, data in image.blobs().items():
                (blobs / digest[7:]).write_bytes(data)
        if isinstance(item, dict):
            top, media_type = index_of(item), OCI_INDEX
            (blobs / sha(top)[7:]).write_bytes(top)
        else:
            top, media_type = item.manifest, OCI_MANIFEST
        entries.append(
            {
                "mediaType": media_type,
                "digest": sha(top),
                "size": len(top),
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        )
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": entries}))
    return root


def tar_directory(root: Path, out: Path) -> Path:
    with tarfile.open(out, "w") as tar:
        for path in sorted(root.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
    return out
