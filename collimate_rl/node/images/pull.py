"""Any image reference into the store: fetch what the store lacks, unpack, record.

A second image on the same base fetches only its own layers: blobs are named by
digest, and the store already holds the base's. :func:`pull_image` says how many
bytes it fetched; :func:`pull` returns just the store's record.

>>> import tempfile
>>> from pathlib import Path
>>> from collimate_rl.node.images.errors import ImageNotFound
>>> with tempfile.TemporaryDirectory() as tmp:
...     try:
...         pull("oci:/nonexistent/layout:v1", ImageStore(Path(tmp)))
...     except ImageNotFound as exc:
...         print(str(exc).split(":")[0])
/nonexistent/layout does not exist
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

import httpx

from collimate_rl.node.images.config import ImageConfig
from collimate_rl.node.images.credentials import Credentials
from collimate_rl.node.images.distribution import RegistryClient
from collimate_rl.node.images.errors import ManifestError, PlatformNotFound
from collimate_rl.node.images.manifest import (
    INDEX_TYPES,
    Descriptor,
    Platform,
    digest_of,
    media_type_of,
    node_platform,
    parse_index,
    parse_manifest,
    select_platform,
)
from collimate_rl.node.images.reference import (
    DockerArchiveReference,
    ImageReference,
    LayoutReference,
    RegistryReference,
    parse_reference,
)
from collimate_rl.node.images.seam import BlobSink
from collimate_rl.node.images.sources import DockerArchiveSource, LayoutSource
from collimate_rl.node.images.store import ImageRecord, ImageStore

__all__ = [
    "ImageSource",
    "Progress",
    "PullResult",
    "canonical_reference",
    "pull",
    "pull_image",
]

#: Progress callback: (bytes done, bytes total, what is being fetched).
Progress = Callable[[int, int, str], None]
# A config blob is a few KiB; refusing a huge one bounds memory.
_MAX_CONFIG: Final = 8 * 1024 * 1024
# index -> index -> manifest is the deepest nesting seen in the wild
_MAX_NESTING: Final = 4


class ImageSource(Protocol):
    """A registry repository or a local image: manifests and blobs by digest."""

    def manifest(self, digest: str | None = None) -> bytes: ...

    def blob_bytes(self, desc: Descriptor, *, max_bytes: int) -> bytes: ...

    def copy_blob(
        self, desc: Descriptor, store: BlobSink, on_progress: Callable[[int], None] | None = None
    ) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class PullResult:
    """What a pull did.

    Attributes:
        record: the store's record of the image.
        reference: the canonical reference it was recorded under.
        bytes_fetched: bytes read from the registry or the local source (manifests,
            config and layers).
        layers_fetched: digests of the layers fetched by this pull.
        layers_reused: digests of the layers the store already held.
    """

    record: ImageRecord
    reference: str
    bytes_fetched: int
    layers_fetched: tuple[str, ...]
    layers_reused: tuple[str, ...]


def canonical_reference(ref: str | ImageReference) -> str:
    """The form an image is recorded under: Docker Hub names in full, local paths absolute.

    >>> canonical_reference("python:3.12-slim")
    'docker.io/library/python:3.12-slim'
    >>> canonical_reference("oci:/srv/app:v1")
    'oci:/srv/app:v1'
    """
    return str(_absolute(parse_reference(ref) if isinstance(ref, str) else ref))


def pull(
    ref: str | ImageReference,
    store: ImageStore,
    *,
    insecure_registries: Iterable[str] = (),
    auth: Credentials | None = None,
    progress: Progress | None = None,
) -> ImageRecord:
    """Pull ``ref`` into ``store`` and return the store's record of it.

    Args:
        ref: any form :func:`~collimate_rl.node.images.reference.parse_reference` reads.
        store: the image store.
        insecure_registries: registries to speak plain HTTP to (loopback ones always are).
        auth: credentials for the registry; ``None`` reads docker's and podman's files.
        progress: called with (bytes done, bytes total, what) while blobs arrive.

    Raises:
        ImageReferenceError: a reference that does not parse.
        ImagePullError: ``ImageNotFound``, ``RegistryAuthError``, ``DigestMismatch``, ...
        ImageStoreError: ``QuotaExceeded``, ``LayerError`` (from the store).
    """
    return pull_image(
        ref, store, insecure_registries=insecure_registries, auth=auth, progress=progress
    ).record


def pull_image(
    ref: str | ImageReference,
    store: ImageStore,
    *,
    insecure_registries: Iterable[str] = (),
    auth: Credentials | None = None,
    progress: Progress | None = None,
    platform: Platform | None = None,
    env: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> PullResult:
    """:func:`pull`, returning what was fetched too (``platform``, ``env``, ``transport``
    override the node's platform, the environment credentials are found with, and the
    HTTP transport)."""
    parsed = _absolute(parse_reference(ref) if isinstance(ref, str) else ref)
    source = _open_source(parsed, insecure_registries, auth, env, transport)
    try:
        return _pull(parsed, source, store, platform or node_platform(), progress)
    finally:
        source.close()


def _pull(
    ref: ImageReference,
    source: ImageSource,
    store: ImageStore,
    platform: Platform,
    progress: Progress | None,
) -> PullResult:
    pinned = ref.digest if isinstance(ref, RegistryReference) else None
    raw, fetched = _manifest(source, store, pinned)
    for _ in range(_MAX_NESTING):
        if media_type_of(raw) not in INDEX_TYPES:
            break
        entry = select_platform(parse_index(raw), platform)
        raw, more = _manifest(source, store, entry.digest)
        fetched += more
    manifest = parse_manifest(raw)
    manifest_digest = digest_of(raw)

    if store.has_blob(manifest.config.digest):
        config_raw = store.blob_path(manifest.config.digest).read_bytes()
    else:
        config_raw = source.blob_bytes(manifest.config, max_bytes=_MAX_CONFIG)
        store.put_blob(manifest.config.digest, config_raw)
        fetched += len(config_raw)
    config = ImageConfig.parse(config_raw)
    _check_config(ref, config, manifest.layers, platform)

    missing: dict[str, Descriptor] = {}
    for layer in manifest.layers:
        if layer.digest not in missing and not store.has_blob(layer.digest):
            missing[layer.digest] = layer
    total = sum(layer.size for layer in missing.values())
    done = 0
    for number, layer in enumerate(missing.values(), 1):
        what = f"layer {number}/{len(missing)} {layer.digest[7:19]}"
        base = done

        def report(have: int, base: int = base, what: str = what) -> None:
            if progress is not None:
                progress(base + have, total, what)

        fetched += source.copy_blob(layer, store, report)
        done += layer.size
    for layer in manifest.layers:
        store.unpack_layer(layer.digest, layer.media_type)
    canonical = str(ref)
    record = store.record_image(
        canonical, manifest_digest, config, [layer.digest for layer in manifest.layers]
    )
    reused = tuple(d.digest for d in manifest.layers if d.digest not in missing)
    return PullResult(record, canonical, fetched, tuple(missing), reused)


def _manifest(source: ImageSource, store: ImageStore, digest: str | None) -> tuple[bytes, int]:
    """A manifest or index (kept in the store) and the bytes fetched for it.

    One named by a sha256 digest the store holds is read from the store: a pinned image
    pulls again with no registry at all.
    """
    if digest is not None and digest.startswith("sha256:") and store.has_blob(digest):
        return store.blob_path(digest).read_bytes(), 0
    raw = source.manifest(digest)
    kept = digest_of(raw)
    if not store.has_blob(kept):
        store.put_blob(kept, raw)
    return raw, len(raw)


def _check_config(
    ref: ImageReference, config: ImageConfig, layers: tuple[Descriptor, ...], platform: Platform
) -> None:
    if config.diff_ids and len(config.diff_ids) != len(layers):
        raise ManifestError(
            f"{ref}: the manifest lists {len(layers)} layers but the config {len(config.diff_ids)}"
        )
    if config.os and config.os != platform.os:
        raise PlatformNotFound(f"{ref} is a {config.os} image; the node runs {platform.os} images")
    if config.architecture and config.architecture != platform.architecture:
        raise PlatformNotFound(
            f"{ref} is built for {config.architecture}, this node is {platform.architecture}: "
            f"pull a {platform.architecture} build (or a multi-platform tag)"
        )


def _absolute(ref: ImageReference) -> ImageReference:
    if isinstance(ref, LayoutReference):
        return LayoutReference(ref.transport, os.path.abspath(ref.path), ref.tag)
    if isinstance(ref, DockerArchiveReference):
        return DockerArchiveReference(os.path.abspath(ref.path), ref.name)
    return ref


class _RegistrySource:
    """A registry repository seen as an :class:`ImageSource`."""

    def __init__(self, ref: RegistryReference, client: RegistryClient) -> None:
        self._ref = ref
        self._client = client

    def manifest(self, digest: str | None = None) -> bytes:
        return self._client.manifest(self._ref, digest)

    def blob_bytes(self, desc: Descriptor, *, max_bytes: int) -> bytes:
        return self._client.blob_bytes(self._ref, desc, max_bytes=max_bytes)

    def copy_blob(
        self, desc: Descriptor, store: BlobSink, on_progress: Callable[[int], None] | None = None
    ) -> int:
        return self._client.copy_blob(self._ref, desc, store, on_progress)

    def close(self) -> None:
        self._client.close()


def _open_source(
    ref: ImageReference,
    insecure_registries: Iterable[str],
    auth: Credentials | None,
    env: Mapping[str, str] | None,
    transport: httpx.BaseTransport | None,
) -> ImageSource:
    if isinstance(ref, LayoutReference):
        return LayoutSource(ref)
    if isinstance(ref, DockerArchiveReference):
        return DockerArchiveSource(ref)
    client = RegistryClient(
        insecure_registries=insecure_registries, auth=auth, env=env, transport=transport
    )
    return _RegistrySource(ref, client)
