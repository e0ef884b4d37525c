"""What the fetchers need of the image store: a structural type, so they depend on no store.

:class:`collimate_rl.node.images.store.ImageStore` has these methods; tests may pass
anything that does.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Protocol

__all__ = ["BlobSink"]


class BlobSink(Protocol):
    """Where fetched blobs go: append to a partial file, then commit it under its digest."""

    def has_blob(self, digest: str) -> bool: ...

    def blob_path(self, digest: str) -> Path: ...

    def open_partial(self, digest: str) -> tuple[BinaryIO, int]: ...

    def commit_partial(self, digest: str) -> Path: ...

    def put_blob(self, digest: str, data: bytes) -> Path: ...
