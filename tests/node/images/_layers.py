"""Crafted layers for the store and unpacker tests: tar entries written with Python's tarfile.

>>> blob = layer_blob([file("a", b"x")], "gzip")
>>> blob.media_type.endswith("+gzip"), blob.digest.startswith("sha256:")
(True, True)
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

MEDIA = {
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "docker": "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
    "none": "application/vnd.oci.image.layer.v1.tar",
}

Entry = tuple[tarfile.TarInfo, bytes]


@dataclass(frozen=True)
class Blob:
    data: bytes
    digest: str
    media_type: str

    def write(self, path: Path) -> Path:
        path.write_bytes(self.data)
        return path


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _info(name: str, kind: bytes, mode: int = 0o644, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = 1_700_000_000
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def file(name: str, data: bytes = b"", mode: int = 0o644, **fields: object) -> Entry:
    info = _info(name, tarfile.REGTYPE, mode, **fields)
    info.size = len(data)
    return info, data


def directory(name: str, mode: int = 0o755) -> Entry:
    return _info(name, tarfile.DIRTYPE, mode), b""


def symlink(name: str, target: str) -> Entry:
    return _info(name, tarfile.SYMTYPE, 0o777, linkname=target), b""


def hardlink(name: str, target: str) -> Entry:
    return _info(name, tarfile.LNKTYPE, 0o644, linkname=target), b""


def device(name: str, kind: bytes = tarfile.CHRTYPE, major: int = 1, minor: int = 3) -> Entry:
    return _info(name, kind, 0o666, devmajor=major, devminor=minor), b""


def fifo(name: str) -> Entry:
    return _info(name, tarfile.FIFOTYPE, 0o644), b""


def tar_bytes(entries: list[Entry], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for info, data in entries:
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def compress(raw: bytes, compression: str) -> bytes:
    if compression in ("gzip", "docker"):
        return gzip.compress(raw, compresslevel=1, mtime=0)
    if compression == "zstd":
        import zstandard

        return bytes(zstandard.ZstdCompressor().compress(raw))
    return raw


def layer_blob(entries: list[Entry], compression: str = "gzip") -> Blob:
    data = compress(tar_bytes(entries), compression)
    return Blob(data, sha256(data), MEDIA[compression])


def raw_blob(raw_tar: bytes, compression: str = "gzip") -> Blob:
    data = compress(raw_tar, compression)
    return Blob(data, sha256(data), MEDIA[compression])


def snapshot(path: Path) -> dict[str, tuple[int, int, bytes | str | None]]:
    """Every entry below ``path`` with its type, mode and content (or link target)."""
    out: dict[str, tuple[int, int, bytes | str | None]] = {}
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            content: bytes | str | None = None
            if os.path.islink(full):
                content = os.readlink(full)
            elif os.path.isfile(full):
                content = Path(full).read_bytes()
            out[os.path.relpath(full, path)] = (st.st_mode, st.st_nlink, content)
    return out
