"""A throwaway stand-in for the store (images-store branch) until it is merged: blobs only."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from collimate_rl.node.images.config import ImageConfig
from collimate_rl.node.images.errors import DigestMismatch


@dataclass(frozen=True)
class FakeRecord:
    ref: str
    manifest_digest: str
    config: ImageConfig
    layers: tuple[str, ...]


class FakeStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "blobs").mkdir(parents=True)
        (root / "partial").mkdir()
        self.unpacked: list[tuple[str, str]] = []
        self.records: dict[str, FakeRecord] = {}

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).exists()

    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / digest.replace(":", "-")

    def open_partial(self, digest: str) -> tuple[BinaryIO, int]:
        path = self.root / "partial" / digest.replace(":", "-")
        handle = path.open("ab")
        return handle, handle.seek(0, 2)

    def commit_partial(self, digest: str) -> Path:
        path = self.root / "partial" / digest.replace(":", "-")
        actual = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            path.unlink()
            raise DigestMismatch(digest, actual)
        return path.replace(self.blob_path(digest))

    def put_blob(self, digest: str, data: bytes) -> Path:
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise DigestMismatch(digest, actual)
        self.blob_path(digest).write_bytes(data)
        return self.blob_path(digest)

    def unpack_layer(self, digest: str, media_type: str) -> Path:
        self.unpacked.append((digest, media_type))
        return self.blob_path(digest)

    def record_image(
        self, ref: str, manifest_digest: str, config: ImageConfig, layers: list[str]
    ) -> FakeRecord:
        self.records[ref] = FakeRecord(ref, manifest_digest, config, tuple(layers))
        return self.records[ref]
