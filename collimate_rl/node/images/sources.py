"""Local images: an OCI layout directory, a tar of one, and what ``docker save`` writes.

Each source answers the same three questions the registry client does (a manifest,
a small blob, a blob copied into the store), so :func:`~collimate_rl.node.images.pull.pull`
treats them alike. Archives are read member by member, by name, from the tar: nothing
is extracted to disk, so no name or link in an archive can write anywhere.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as empty:
...     LayoutSource(LayoutReference("oci", empty)).manifest()
Traceback (most recent call last):
...
collimate_rl.node.images.errors.ImageNotFound: ... has no index.json: not an OCI image layout ...
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final

from collimate_rl.node.images.errors import ImageNotFound, ImagePullError, ManifestError
from collimate_rl.node.images.manifest import (
    OCI_CONFIG,
    OCI_LAYER,
    OCI_LAYER_GZIP,
    OCI_LAYER_ZSTD,
    OCI_MANIFEST,
    Descriptor,
    digest_of,
    parse_index,
    verify_digest,
)
from collimate_rl.node.images.reference import (
    DockerArchiveReference,
    LayoutReference,
    parse_digest,
    parse_reference,
)
from collimate_rl.node.images.seam import BlobSink

__all__ = ["DockerArchiveSource", "LayoutSource"]

_REF_NAME: Final = "org.opencontainers.image.ref.name"
_CHUNK: Final = 1 << 20
_MAX_JSON: Final = 4 * 1024 * 1024
_MAX_LINK_HOPS: Final = 8


class _Files:
    """Files of a directory or members of a tar, read by relative name only."""

    def __init__(self, path: str, *, archive: bool) -> None:
        self.path = Path(path)
        self._tar: tarfile.TarFile | None = None
        self._members: dict[str, tarfile.TarInfo] = {}
        if not self.path.exists():
            raise ImageNotFound(
                f"{path} does not exist: name an existing {'archive' if archive else 'directory'}"
            )
        if archive:
            try:
                # open for the source's lifetime; close() closes it
                self._tar = tarfile.open(self.path, "r:*")  # noqa: SIM115
                for member in self._tar.getmembers():
                    self._members.setdefault(_clean(member.name), member)
            except (tarfile.TarError, OSError) as exc:
                self.close()
                raise ImagePullError(f"{path} is not a readable tar archive: {exc}") from exc
        elif not self.path.is_dir():
            raise ImageNotFound(f"{path} is not a directory: oci: names an OCI layout directory")

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()

    def exists(self, name: str) -> bool:
        if self._tar is None:
            return (self.path / name).is_file()
        return _clean(name) in self._members

    def size(self, name: str) -> int:
        if self._tar is None:
            return (self.path / name).stat().st_size
        return self._member(name).size

    def open(self, name: str) -> IO[bytes]:
        """A reader of one file; a missing one is :class:`ImageNotFound`."""
        if self._tar is None:
            try:
                return (self.path / name).open("rb")
            except OSError as exc:
                raise ImageNotFound(f"{self.path}: cannot read {name}: {exc}") from exc
        reader = self._tar.extractfile(self._member(name))
        if reader is None:  # pragma: no cover - _member returns regular files only
            raise ImagePullError(f"{self.path}: {name} is not a regular file")
        return reader

    def read(self, name: str, limit: int = _MAX_JSON) -> bytes:
        if self.size(name) > limit:
            raise ImagePullError(f"{self.path}: {name} is larger than {limit} bytes")
        with self.open(name) as reader:
            return reader.read()

    def _member(self, name: str) -> tarfile.TarInfo:
        # Links inside the archive are followed by name, within the archive, a few hops at most.
        key = _clean(name)
        for _ in range(_MAX_LINK_HOPS):
            member = self._members.get(key)
            if member is None:
                raise ImageNotFound(f"{self.path}: the archive has no {name}")
            if member.isreg():
                return member
            if member.issym():
                key = _clean(posixpath.join(posixpath.dirname(key), member.linkname))
            elif member.islnk():
                key = _clean(member.linkname)
            else:
                raise ImagePullError(f"{self.path}: {name} is not a regular file in the archive")
        raise ImagePullError(f"{self.path}: {name} is a chain of links in the archive")


class LayoutSource:
    """An OCI image layout: ``oci:DIR[:tag]`` or ``oci-archive:FILE[:tag]``."""

    def __init__(self, ref: LayoutReference) -> None:
        self.ref = ref
        self._files = _Files(ref.path, archive=ref.transport == "oci-archive")

    def close(self) -> None:
        self._files.close()

    def manifest(self, digest: str | None = None) -> bytes:
        """The manifest the tag names (the only one, with no tag), or the one of ``digest``."""
        if digest is None:
            digest = self._pick().digest
        return self.blob_bytes_by_digest(digest, _MAX_JSON)

    def blob_bytes(self, desc: Descriptor, *, max_bytes: int) -> bytes:
        return self.blob_bytes_by_digest(desc.digest, max_bytes)

    def blob_bytes_by_digest(self, digest: str, max_bytes: int) -> bytes:
        data = self._files.read(_blob_name(digest), max_bytes)
        verify_digest(data, digest, what=f"{digest} in {self.ref.path}")
        return data

    def copy_blob(
        self, desc: Descriptor, store: BlobSink, on_progress: Callable[[int], None] | None = None
    ) -> int:
        with self._files.open(_blob_name(desc.digest)) as reader:
            return _copy(reader, desc.digest, store, on_progress)

    def _pick(self) -> Descriptor:
        if not self._files.exists("index.json"):
            raise ImageNotFound(
                f"{self.ref.path} has no index.json: not an OCI image layout (make one with "
                "`skopeo copy ... oci:DIR:TAG` or `umoci init`)"
            )
        index = parse_index(self._files.read("index.json"))
        tags = [d.annotation(_REF_NAME) for d in index.manifests]
        if self.ref.tag is None:
            if len(index.manifests) == 1:
                return index.manifests[0]
            raise ImageNotFound(
                f"{self.ref} holds {len(index.manifests)} images (tags: "
                f"{', '.join(sorted(t for t in tags if t)) or 'none'}); name one as "
                f"{self.ref.transport}:{self.ref.path}:TAG"
            )
        for desc, tag in zip(index.manifests, tags, strict=True):
            if tag is not None and (tag == self.ref.tag or tag.endswith(f":{self.ref.tag}")):
                return desc
        raise ImageNotFound(
            f"{self.ref.path} has no image tagged {self.ref.tag!r} (tags: "
            f"{', '.join(sorted(t for t in tags if t)) or 'none'})"
        )


class DockerArchiveSource:
    """A ``docker save`` tarball (``manifest.json`` with ``Config``, ``RepoTags``, ``Layers``).

    Its layers carry no digests, so the source hashes the compressed ones once and takes
    an uncompressed one's digest from the config's ``diff_ids`` (the store verifies it).
    """

    def __init__(self, ref: DockerArchiveReference) -> None:
        self.ref = ref
        self._files = _Files(ref.path, archive=True)
        self._by_digest: dict[str, str] = {}
        self._manifest: bytes | None = None

    def close(self) -> None:
        self._files.close()

    def manifest(self, digest: str | None = None) -> bytes:
        """An OCI manifest written for the archive's image (its digest is stable)."""
        if self._manifest is None:
            self._manifest = self._build_manifest()
        if digest is not None and digest != digest_of(self._manifest):
            raise ImageNotFound(f"{self.ref} has no manifest {digest}")
        return self._manifest

    def blob_bytes(self, desc: Descriptor, *, max_bytes: int) -> bytes:
        data = self._files.read(self._name_of(desc.digest), max_bytes)
        verify_digest(data, desc.digest, what=f"{desc.digest} in {self.ref.path}")
        return data

    def copy_blob(
        self, desc: Descriptor, store: BlobSink, on_progress: Callable[[int], None] | None = None
    ) -> int:
        with self._files.open(self._name_of(desc.digest)) as reader:
            return _copy(reader, desc.digest, store, on_progress)

    def _name_of(self, digest: str) -> str:
        self.manifest()
        if digest not in self._by_digest:
            raise ImageNotFound(f"{self.ref} has no blob {digest}")
        return self._by_digest[digest]

    def _build_manifest(self) -> bytes:
        entry = self._entry()
        config_name = entry["Config"]
        config_raw = self._files.read(config_name)
        config_digest = digest_of(config_raw)
        self._by_digest[config_digest] = config_name
        try:
            diff_ids = json.loads(config_raw).get("rootfs", {}).get("diff_ids") or []
        except (ValueError, AttributeError) as exc:
            raise ManifestError(f"{self.ref}: the image config {config_name} is not JSON") from exc
        layers = []
        for position, name in enumerate(entry["Layers"]):
            media_type, digest = self._describe_layer(name, diff_ids, position)
            self._by_digest[digest] = name
            layers.append(
                {"mediaType": media_type, "digest": digest, "size": self._files.size(name)}
            )
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config_raw)},
            "layers": layers,
        }
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    def _describe_layer(self, name: str, diff_ids: list[Any], position: int) -> tuple[str, str]:
        with self._files.open(name) as reader:
            magic = reader.read(4)
        media_type = OCI_LAYER
        if magic[:2] == b"\x1f\x8b":
            media_type = OCI_LAYER_GZIP
        elif magic == b"\x28\xb5\x2f\xfd":
            media_type = OCI_LAYER_ZSTD
        if (
            media_type == OCI_LAYER
            and position < len(diff_ids)
            and isinstance(diff_ids[position], str)
        ):
            parse_digest(diff_ids[position])
            return media_type, diff_ids[position]
        digest = hashlib.sha256()
        with self._files.open(name) as reader:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
        return media_type, "sha256:" + digest.hexdigest()

    def _entry(self) -> dict[str, Any]:
        try:
            entries = json.loads(self._files.read("manifest.json"))
        except ImageNotFound:
            raise ImageNotFound(
                f"{self.ref.path} has no manifest.json: not a docker-archive (`docker save` "
                "writes one); for an OCI layout use oci-archive:"
            ) from None
        except ValueError as exc:
            raise ManifestError(f"{self.ref.path}: manifest.json is not JSON") from exc
        if (
            not isinstance(entries, list)
            or not all(_valid_entry(e) for e in entries)
            or not entries
        ):
            raise ManifestError(f"{self.ref.path}: manifest.json is not a list of images")
        if self.ref.name is None:
            if len(entries) == 1:
                return dict(entries[0])
            raise ImageNotFound(
                f"{self.ref.path} holds {len(entries)} images; name one as "
                f"docker-archive:{self.ref.path}:NAME:TAG (tags: {_tags(entries)})"
            )
        wanted = str(parse_reference(self.ref.name))
        for entry in entries:
            for tag in entry.get("RepoTags") or []:
                try:
                    if str(parse_reference(tag)) == wanted:
                        return dict(entry)
                except ValueError:
                    continue
        raise ImageNotFound(
            f"{self.ref.path} has no image {self.ref.name!r} (tags: {_tags(entries)})"
        )


def _valid_entry(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("Config"), str)
        and isinstance(entry.get("Layers"), list)
        and all(isinstance(layer, str) for layer in entry["Layers"])
    )


def _tags(entries: list[dict[str, Any]]) -> str:
    return ", ".join(t for e in entries for t in (e.get("RepoTags") or [])) or "none"


def _copy(
    reader: IO[bytes], digest: str, store: BlobSink, on_progress: Callable[[int], None] | None
) -> int:
    handle, have = store.open_partial(digest)
    copied = 0
    try:
        if have:
            handle.truncate(0)  # a local read is cheap: start over rather than seek
        while chunk := reader.read(_CHUNK):
            handle.write(chunk)
            copied += len(chunk)
            if on_progress is not None:
                on_progress(copied)
    finally:
        handle.close()
    store.commit_partial(digest)
    return copied


def _blob_name(digest: str) -> str:
    algorithm, encoded = parse_digest(digest)  # a checked digest: no '/' or '..' in the name
    return f"blobs/{algorithm}/{encoded}"


def _clean(name: str) -> str:
    return posixpath.normpath("/" + name).lstrip("/")
