"""The content-addressed image store: blobs, unpacked layers, images, and who uses them.

Blobs are kept by digest (``blobs/sha256/<hex>``) and layers unpacked once
(``layers/sha256/<hex>/``), so images on the same base share both. Everything
survives a node restart: a download resumes from its partial file, an unpack
under way is a temporary directory renamed into place only when whole, and the
index of images is replaced atomically. Two node processes may share a store:
changes take an exclusive ``flock``, a layer's unpack its own.

The quota (``max_bytes``) counts blobs and unpacked layer bytes. What would
pass it is refused with :class:`QuotaExceeded` and left nowhere: a partial
download is deleted, an unpack stops while it streams and its directory goes.

Whatever one machine crash leaves is safe but not guaranteed complete: blobs are
checked against their digest again when unpacked, layer files are not fsync'd.

A template's use of an image is recorded under its holder, the ``ImageStore`` of the
node process that baked it, which keeps a lock file flocked while it lives
(:mod:`._store_holders`). A node that stops cleanly releases its records
(:meth:`ImageStore.close`); one that was killed leaves records whose holder is
gone, which the listing leaves out and which prune, the next node's start and any
change of the users delete. Another node's records stay while it runs.

Prune removes the images no template uses, then the layers and blobs nothing
uses any more that nobody touched in the last ``grace_s`` (a pull under way
has touched what it will record).

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     store = ImageStore(Path(tmp))
...     digest = "sha256:" + hashlib.sha256(b"{}").hexdigest()
...     store.put_blob(digest, b"{}").read_bytes(), store.has_blob(digest), store.total_bytes()
(b'{}', True, 2)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from collimate_rl.node.images._layer_stream import split_digest
from collimate_rl.node.images._store_files import flocked, write_atomic
from collimate_rl.node.images._store_holders import StoreHolders
from collimate_rl.node.images._store_prune import PRUNE_GRACE_S, PruneReport, StorePruning
from collimate_rl.node.images.config import ImageConfig
from collimate_rl.node.images.errors import (
    DigestMismatch,
    ImageNotFound,
    ImageStoreError,
    QuotaExceeded,
)
from collimate_rl.node.images.unpack import LayerReport, Neutralised, unpack_layer_blob

__all__ = ["PRUNE_GRACE_S", "ImageRecord", "ImageStore", "PruneReport"]

#: 2: records of use are kept by holder (``holders``); 1 kept them by template (``users``).
_INDEX_VERSION = 2


@dataclass(frozen=True)
class ImageRecord:
    """An image in the store.

    Attributes:
        ref: the reference it was pulled as (the store's key).
        manifest_digest: the digest of its (platform) manifest.
        config: its config.
        layers: layer blob digests, lowest first.
        layer_dirs: the unpacked layers, lowest first (overlayfs lists them the other way).
        size_bytes: its blobs plus its unpacked layers (shared ones counted in full).
        used_by: ids of the templates that use it, of every live holder (a node that was
            killed holds none).
    """

    ref: str
    manifest_digest: str
    config: ImageConfig
    layers: tuple[str, ...]
    layer_dirs: tuple[Path, ...]
    size_bytes: int
    used_by: tuple[str, ...]


class ImageStore(StoreHolders, StorePruning):
    """Blobs, unpacked layers and images under ``root``.

    The object is one holder of records of use (a node has one): :meth:`use` and
    :meth:`release` change its own records, :meth:`close` drops them all.

    Args:
        root: the store's directory (``--image-store``); created if missing.
        max_bytes: the quota on blobs plus unpacked layers (``--image-store-max-bytes``).
    """

    def __init__(self, root: Path, *, max_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        # The layers must be reachable by the sandbox's uid (overlayfs resolves lowerdir as
        # the mounter); blobs, partials and temporary unpacks are nobody else's business.
        for sub, mode in (
            ("", 0o711),
            ("blobs", 0o700),
            ("blobs/sha256", 0o700),
            ("partial", 0o700),
            ("partial/sha256", 0o700),
            ("layers", 0o711),
            ("layers/sha256", 0o711),
            ("tmp", 0o700),
            ("holders", 0o700),
        ):
            path = self.root / sub
            path.mkdir(parents=True, exist_ok=True)
            os.chmod(path, mode)
        self._lock = self.root / "lock"
        self._index_path = self.root / "index.json"
        self._open_partials: dict[str, BinaryIO] = {}
        self._init_holders()

    # -- blobs ---------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        """Where the blob ``digest`` is (or would be) kept."""
        algo, hexpart = split_digest(digest)
        return self.root / "blobs" / algo / hexpart

    def _partial_path(self, digest: str) -> Path:
        algo, hexpart = split_digest(digest)
        return self.root / "partial" / algo / hexpart

    def has_blob(self, digest: str) -> bool:
        """Whether the blob is kept (and, if so, mark it recently wanted so prune keeps it)."""
        path = self.blob_path(digest)
        with flocked(self._lock, exclusive=False):
            try:
                os.utime(path)
            except FileNotFoundError:
                return False
        return True

    def open_partial(self, digest: str) -> tuple[BinaryIO, int]:
        """An append handle on the blob's partial download and the bytes already in it.

        A second writer of the same blob waits until the first closes its handle. Close
        the handle before :meth:`commit_partial` (which closes it if you did not).
        """
        path = self._partial_path(digest)
        while True:
            handle = open(path, "ab")  # noqa: SIM115 - the caller owns it
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                # The holder may have committed (renamed) the file while we waited.
                if os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino:
                    break
            except FileNotFoundError:
                pass
            handle.close()
        self._open_partials[digest] = handle
        return handle, handle.tell()

    def commit_partial(self, digest: str) -> Path:
        """Verify the partial download and make it the blob.

        Raises:
            DigestMismatch: the bytes do not hash to ``digest``; the partial is deleted.
            QuotaExceeded: keeping it would pass ``max_bytes``; the partial is deleted.
        """
        handle = self._open_partials.pop(digest, None)
        if handle is not None and not handle.closed:
            handle.close()
        path, blob = self._partial_path(digest), self.blob_path(digest)
        with flocked(path, exclusive=True):
            if blob.exists():  # another writer committed it first: ours is not needed
                path.unlink(missing_ok=True)
                return blob
            if not path.exists() or path.stat().st_size == 0:
                path.unlink(missing_ok=True)
                raise ImageStoreError(f"no partial download of {digest} to commit")
            actual = _hash_file(path, split_digest(digest)[0])
            if actual != digest:
                path.unlink()
                raise DigestMismatch(digest, actual, what="blob")
            self._admit(path, blob, path.stat().st_size)
        return blob

    def put_blob(self, digest: str, data: bytes) -> Path:
        """Keep a small blob (a manifest, a config) after checking its digest."""
        algo, _ = split_digest(digest)
        actual = f"{algo}:{hashlib.new(algo, data).hexdigest()}"
        if actual != digest:
            raise DigestMismatch(digest, actual, what="blob")
        blob = self.blob_path(digest)
        if blob.exists():
            return blob
        tmp = self.root / "tmp" / f"{blob.name}.{os.getpid()}.{os.urandom(4).hex()}"
        tmp.write_bytes(data)
        try:
            self._admit(tmp, blob, len(data))
        finally:
            tmp.unlink(missing_ok=True)
        return blob

    def _admit(self, src: Path, blob: Path, size: int) -> None:
        """Rename ``src`` to ``blob`` if the quota allows; else delete ``src`` and refuse."""
        with flocked(self._lock, exclusive=True):
            if blob.exists():
                src.unlink()
                return
            if self.max_bytes is not None:
                needed = self._total_bytes() + size
                if needed > self.max_bytes:
                    src.unlink()
                    raise QuotaExceeded(needed, self.max_bytes)
            os.chmod(src, 0o600)
            os.replace(src, blob)

    # -- layers --------------------------------------------------------------------------

    def _layer_paths(self, digest: str) -> tuple[Path, Path, Path]:
        algo, hexpart = split_digest(digest)
        base = self.root / "layers" / algo
        return base / hexpart, base / f"{hexpart}.json", base / f"{hexpart}.lock"

    def layer_report(self, digest: str) -> LayerReport | None:
        """What unpacking the layer did (bytes, neutralised entries); None if not unpacked."""
        layer_dir, record, _ = self._layer_paths(digest)
        try:
            doc = json.loads(record.read_bytes())
        except FileNotFoundError:
            return None
        if not layer_dir.is_dir():
            return None
        return LayerReport(
            digest=doc["digest"],
            unpacked_bytes=int(doc["unpacked_bytes"]),
            entries=int(doc["entries"]),
            neutralised=tuple(Neutralised(p, w) for p, w in doc["neutralised"]),
        )

    def unpack_layer(self, digest: str, media_type: str) -> Path:
        """The unpacked layer of the blob ``digest``, unpacking it unless that was done.

        Raises:
            ImageStoreError: the blob is not in the store.
            LayerError: the layer is unsafe or malformed; nothing is kept.
            DigestMismatch: the blob on disk is not the layer its digest names.
            QuotaExceeded: the layer would pass ``max_bytes``; nothing is kept.
        """
        layer_dir, record, lock = self._layer_paths(digest)
        if self._touch_layer(layer_dir, record):
            return layer_dir
        with flocked(lock, exclusive=True):
            if self._touch_layer(layer_dir, record):
                return layer_dir  # another process unpacked it while we waited
            blob = self.blob_path(digest)
            if not blob.is_file():
                raise ImageStoreError(f"layer {digest} is not in the store: pull it first")
            budget = None
            if self.max_bytes is not None:
                with flocked(self._lock, exclusive=False):
                    budget = max(0, self.max_bytes - self._total_bytes())
            tmp = self.root / "tmp" / f"{layer_dir.name}.{os.getpid()}.{os.urandom(4).hex()}"
            report = unpack_layer_blob(
                blob, digest, media_type, tmp, budget=budget, quota=self.max_bytes
            )
            try:
                with flocked(self._lock, exclusive=True):
                    if self.max_bytes is not None:
                        needed = self._total_bytes() + report.unpacked_bytes
                        if needed > self.max_bytes:
                            raise QuotaExceeded(needed, self.max_bytes)
                    doc = {
                        "digest": digest,
                        "media_type": media_type,
                        "unpacked_bytes": report.unpacked_bytes,
                        "entries": report.entries,
                        "neutralised": [[n.path, n.what] for n in report.neutralised],
                    }
                    write_atomic(record, json.dumps(doc).encode())
                    if layer_dir.exists():  # a leftover of a crash between the two renames
                        shutil.rmtree(layer_dir)
                    os.rename(tmp, layer_dir)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return layer_dir

    def _touch_layer(self, layer_dir: Path, record: Path) -> bool:
        with flocked(self._lock, exclusive=False):
            if not layer_dir.is_dir():
                return False
            try:
                os.utime(record)
            except FileNotFoundError:
                return False
        return True

    # -- images --------------------------------------------------------------------------

    def _read_index(self) -> dict[str, Any]:
        try:
            doc = json.loads(self._index_path.read_bytes())
        except FileNotFoundError:
            return {"version": _INDEX_VERSION, "images": {}, "holders": {}}
        if doc.get("version") == 1:
            # Its records of use name no holder: a node of that version cannot share a store
            # of this one (it refuses the index once rewritten), so they are a stopped
            # node's, released as a killed holder's are.
            return {"version": _INDEX_VERSION, "images": doc["images"], "holders": {}}
        if doc.get("version") != _INDEX_VERSION:
            raise ImageStoreError(
                f"{self._index_path} is of version {doc.get('version')!r}, not "
                f"{_INDEX_VERSION}: a newer collimate wrote it"
            )
        return dict(doc)

    def _write_index(self, doc: dict[str, Any]) -> None:
        write_atomic(self._index_path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def record_image(
        self, ref: str, manifest_digest: str, config: ImageConfig, layers: list[str]
    ) -> ImageRecord:
        """Record that ``ref`` is the image ``manifest_digest`` with these layers (unpacked).

        Raises:
            ImageStoreError: a layer is not unpacked in the store.
        """
        blobs = [manifest_digest, *layers]
        config_digest = self._config_digest(manifest_digest)
        if config_digest is not None:
            blobs.append(config_digest)
        with flocked(self._lock, exclusive=True):
            for layer in layers:
                if not self._layer_paths(layer)[0].is_dir():
                    raise ImageStoreError(f"layer {layer} of {ref} is not unpacked in the store")
            doc = self._read_index()
            doc["images"][ref] = {
                "manifest": manifest_digest,
                "config": config.to_json(),
                "layers": list(layers),
                "blobs": sorted(set(blobs)),
            }
            self._write_index(doc)
            record = self._record(doc, ref, self._live_holders(doc))
        if record is None:  # pragma: no cover - written just above, under the lock
            raise ImageStoreError(f"image {ref!r} vanished while it was recorded")
        return record

    def _config_digest(self, manifest_digest: str) -> str | None:
        try:
            manifest = json.loads(self.blob_path(manifest_digest).read_bytes())
            digest = manifest["config"]["digest"]
            split_digest(digest)
        except (OSError, ValueError, KeyError, TypeError, ImageStoreError):
            return None
        return str(digest)

    def image(self, ref: str) -> ImageRecord | None:
        """The image recorded as ``ref``, or None (its users: those of live holders)."""
        with flocked(self._lock, exclusive=False):
            doc = self._read_index()
            return self._record(doc, ref, self._live_holders(doc))

    def images(self) -> list[ImageRecord]:
        """Every image in the store, by ref; the records of holders that are gone are
        deleted first."""
        with flocked(self._lock, exclusive=True):
            doc = self._read_index()
            if self._release_gone(doc):
                self._write_index(doc)
            live = doc["holders"]
            records = [self._record(doc, ref, live) for ref in sorted(doc["images"])]
        return [r for r in records if r is not None]

    def _record(
        self, doc: dict[str, Any], ref: str, live: dict[str, dict[str, Any]]
    ) -> ImageRecord | None:
        entry = doc["images"].get(ref)
        if entry is None:
            return None
        layers = tuple(entry["layers"])
        size = sum(self._blob_size(b) for b in entry["blobs"])
        size += sum(self._layer_bytes(layer) for layer in layers)
        users = sorted(
            {t for h in live.values() for t, use in h["templates"].items() if use["ref"] == ref}
        )
        return ImageRecord(
            ref=ref,
            manifest_digest=entry["manifest"],
            config=ImageConfig.parse(entry["config"]),
            layers=layers,
            layer_dirs=tuple(self._layer_paths(layer)[0] for layer in layers),
            size_bytes=size,
            used_by=tuple(users),
        )

    def use(self, ref: str, template_id: str) -> None:
        """Record that this holder's template ``template_id`` uses the image ``ref``
        (replacing any other image it used).

        The template keeps that image's layers from prune even if ``ref`` is later
        recorded as another image (a tag that moved), while this holder lives. Another
        holder's template of the same id is another record.

        Raises:
            ImageNotFound: no image ``ref`` in the store.
        """
        with flocked(self._lock, exclusive=True):
            doc = self._read_index()
            self._release_gone(doc)
            entry = doc["images"].get(ref)
            if entry is None:
                raise ImageNotFound(f"image {ref!r} is not in the node's image store: pull it")
            self._hold(doc, template_id, {"ref": ref, "blobs": entry["blobs"]})
            self._write_index(doc)

    def release(self, template_id: str) -> None:
        """Forget that this holder's ``template_id`` uses an image (nothing if it used none)."""
        with flocked(self._lock, exclusive=True):
            doc = self._read_index()
            gone = self._release_gone(doc)
            if self._hold(doc, template_id, None) or gone:
                self._write_index(doc)

    def release_gone(self) -> list[str]:
        """Delete the records of every holder that is gone (a node that was killed); the ids
        of those holders. A node calls it when it starts."""
        with flocked(self._lock, exclusive=True):
            doc = self._read_index()
            gone = self._release_gone(doc)
            if gone:
                self._write_index(doc)
        return gone

    def close(self) -> None:
        """Release every record of this holder (a node's clean stop). Using the store again
        makes it a holder again."""
        with flocked(self._lock, exclusive=True):
            doc = self._read_index()
            had = self._holder_id in doc["holders"]
            self._drop_holder(doc)
            if had:
                self._write_index(doc)

    # -- sizes and pruning ---------------------------------------------------------------

    def _blob_size(self, digest: str) -> int:
        try:
            return self.blob_path(digest).stat().st_size
        except FileNotFoundError:
            return 0

    def _layer_bytes(self, digest: str) -> int:
        try:
            doc = json.loads(self._layer_paths(digest)[1].read_bytes())
        except FileNotFoundError:
            return 0
        return int(doc["unpacked_bytes"])

    def _total_bytes(self) -> int:
        total = 0
        for entry in os.scandir(self.root / "blobs" / "sha256"):
            with contextlib.suppress(FileNotFoundError):
                total += entry.stat(follow_symlinks=False).st_size
        for entry in os.scandir(self.root / "layers" / "sha256"):
            if entry.name.endswith(".json"):
                with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                    total += int(json.loads(Path(entry.path).read_bytes())["unpacked_bytes"])
        return total

    def total_bytes(self) -> int:
        """Bytes the quota counts: every blob plus every unpacked layer."""
        with flocked(self._lock, exclusive=False):
            return self._total_bytes()


def _hash_file(path: Path, algo: str) -> str:
    digest = hashlib.new(algo)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return f"{algo}:{digest.hexdigest()}"
