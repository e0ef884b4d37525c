"""Pruning the image store: images no template uses, then what nothing uses any more.

Mixed into :class:`~collimate_rl.node.images.store.ImageStore`. The records of use of a
holder that is gone (a node that was killed) are deleted first: only live holders' templates
keep images (:mod:`._store_holders`). Layers and blobs
that no remaining image and no template holds are removed unless touched in the
last ``grace_s`` seconds: a pull under way has touched (``has_blob``,
``unpack_layer``) what it is about to record. Partial downloads nobody resumed
for a day go too, and the temporary directories of unpacks that crashed.

>>> PRUNE_GRACE_S
600.0
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collimate_rl.node.images._store_files import flocked, try_flock

__all__ = ["PARTIAL_MAX_AGE_S", "PRUNE_GRACE_S", "PruneReport", "StorePruning"]

#: What prune leaves alone: unused blobs and layers touched this recently (a pull under way).
PRUNE_GRACE_S = 600.0
#: Partial downloads nobody resumed for this long are pruned.
PARTIAL_MAX_AGE_S = 86400.0


@dataclass(frozen=True)
class PruneReport:
    """What :meth:`ImageStore.prune` removed.

    Attributes:
        images: refs of the images removed.
        layers: digests of the unpacked layers removed.
        blobs: digests of the blobs removed.
        freed_bytes: what that gave back to the quota.
    """

    images: tuple[str, ...]
    layers: tuple[str, ...]
    blobs: tuple[str, ...]
    freed_bytes: int


class StorePruning:
    """The store's prune; the store provides its files and index."""

    root: Path
    _lock: Path

    def _read_index(self) -> dict[str, Any]:
        raise NotImplementedError

    def _write_index(self, doc: dict[str, Any]) -> None:
        raise NotImplementedError

    def _layer_paths(self, digest: str) -> tuple[Path, Path, Path]:
        raise NotImplementedError

    def _layer_bytes(self, digest: str) -> int:
        raise NotImplementedError

    def _release_gone(self, doc: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def prune(self, *, grace_s: float = PRUNE_GRACE_S) -> PruneReport:
        """Remove images no template uses, then layers and blobs nothing uses.

        A template counts while its holder lives: a killed node's records are deleted
        first. Layers and blobs touched in the last ``grace_s`` seconds stay (a pull under way
        has touched what it will record); so do partial downloads younger than a day.
        """
        with flocked(self._lock, exclusive=True):
            doc = self._read_index()
            released = self._release_gone(doc)
            uses = [u for h in doc["holders"].values() for u in h["templates"].values()]
            used_refs = {use["ref"] for use in uses}
            gone = sorted(ref for ref in doc["images"] if ref not in used_refs)
            for ref in gone:
                del doc["images"][ref]
            if gone or released:
                self._write_index(doc)
            keep: set[str] = set()
            for entry in doc["images"].values():
                keep.update(entry["blobs"])
            for use in uses:
                keep.update(use["blobs"])
            cutoff = time.time() - grace_s
            freed, layers = self._prune_layers(keep, cutoff)
            blob_freed, blobs = self._prune_blobs(keep, cutoff)
            self._prune_leftovers()
        return PruneReport(tuple(gone), tuple(layers), tuple(blobs), freed + blob_freed)

    def _prune_layers(self, keep: set[str], cutoff: float) -> tuple[int, list[str]]:
        freed, removed = 0, []
        base = self.root / "layers" / "sha256"
        for entry in sorted(os.scandir(base), key=lambda e: e.name):
            if not entry.name.endswith(".json"):
                continue
            digest = "sha256:" + entry.name[: -len(".json")]
            if digest in keep or entry.stat().st_mtime > cutoff:
                continue
            layer_dir, record, lock = self._layer_paths(digest)
            fd = try_flock(lock)
            if fd is None and lock.exists():
                continue  # being unpacked again right now
            try:
                freed += self._layer_bytes(digest)
                record.unlink()
                shutil.rmtree(layer_dir, ignore_errors=True)
                lock.unlink(missing_ok=True)
            finally:
                if fd is not None:
                    os.close(fd)
            removed.append(digest)
        return freed, removed

    def _prune_blobs(self, keep: set[str], cutoff: float) -> tuple[int, list[str]]:
        freed, removed = 0, []
        for entry in sorted(os.scandir(self.root / "blobs" / "sha256"), key=lambda e: e.name):
            digest = "sha256:" + entry.name
            st = entry.stat(follow_symlinks=False)
            if digest in keep or st.st_mtime > cutoff:
                continue
            os.unlink(entry.path)
            freed += st.st_size
            removed.append(digest)
        return freed, removed

    def _prune_leftovers(self) -> None:
        """Partial downloads nobody resumed for a day, unpacks a crash left behind."""
        stale = time.time() - PARTIAL_MAX_AGE_S
        for entry in os.scandir(self.root / "partial" / "sha256"):
            if entry.stat().st_mtime < stale:
                fd = try_flock(Path(entry.path))
                if fd is not None:
                    os.unlink(entry.path)
                    os.close(fd)
        for entry in os.scandir(self.root / "tmp"):
            if not entry.is_dir(follow_symlinks=False):
                if entry.stat(follow_symlinks=False).st_mtime < stale:  # a put_blob's, crashed
                    os.unlink(entry.path)
                continue
            # an unpack under way holds its layer's lock; a crashed one holds nothing
            hexpart = entry.name.split(".", 1)[0]
            lock = self.root / "layers" / "sha256" / f"{hexpart}.lock"
            fd = try_flock(lock)
            if fd is None and lock.exists():
                continue
            try:
                shutil.rmtree(entry.path, ignore_errors=True)
            finally:
                if fd is not None:
                    os.close(fd)
