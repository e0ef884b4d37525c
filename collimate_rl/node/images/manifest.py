"""Manifests and indexes (OCI and Docker schema 2), and the node's platform.

One reader for all sources: a registry, an OCI layout and the manifest the
``docker-archive`` source writes for itself all go through :func:`parse_manifest`.

>>> raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
...     "config": {"mediaType": OCI_CONFIG, "digest": "sha256:" + "1" * 64, "size": 2},
...     "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": "sha256:" + "2" * 64, "size": 9}]})
>>> m = parse_manifest(raw.encode())
>>> m.config.size, [layer.media_type for layer in m.layers] == [OCI_LAYER_GZIP]
(2, True)
>>> node_platform("aarch64")
Platform(os='linux', architecture='arm64', variant='v8')
"""

from __future__ import annotations

import hashlib
import json
import platform as _platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from collimate_rl.node.images.errors import DigestMismatch, ManifestError, PlatformNotFound
from collimate_rl.node.images.reference import parse_digest

__all__ = [
    "ACCEPT_MANIFESTS",
    "DOCKER_CONFIG",
    "DOCKER_LAYER_GZIP",
    "DOCKER_MANIFEST",
    "DOCKER_MANIFEST_LIST",
    "INDEX_TYPES",
    "LAYER_TYPES",
    "MAX_MANIFEST_BYTES",
    "OCI_CONFIG",
    "OCI_INDEX",
    "OCI_LAYER",
    "OCI_LAYER_GZIP",
    "OCI_LAYER_ZSTD",
    "OCI_MANIFEST",
    "Descriptor",
    "Index",
    "Manifest",
    "Platform",
    "digest_of",
    "node_platform",
    "parse_index",
    "parse_manifest",
    "select_platform",
    "verify_digest",
]

OCI_INDEX: Final = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG: Final = "application/vnd.oci.image.config.v1+json"
OCI_LAYER: Final = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP: Final = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD: Final = "application/vnd.oci.image.layer.v1.tar+zstd"
DOCKER_MANIFEST_LIST: Final = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST: Final = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG: Final = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP: Final = "application/vnd.docker.image.rootfs.diff.tar.gzip"

INDEX_TYPES: Final = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})
MANIFEST_TYPES: Final = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
CONFIG_TYPES: Final = frozenset({OCI_CONFIG, DOCKER_CONFIG})
#: Layer media types the store unpacks (the non-distributable ones are the same bytes).
LAYER_TYPES: Final = frozenset(
    {
        OCI_LAYER,
        OCI_LAYER_GZIP,
        OCI_LAYER_ZSTD,
        DOCKER_LAYER_GZIP,
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    }
)
#: The ``Accept`` header of a manifest request: every type above, indexes first.
ACCEPT_MANIFESTS: Final = ", ".join(
    (OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST)
)
#: The distribution registry refuses manifests above 4 MiB; so do we (a memory bound).
MAX_MANIFEST_BYTES: Final = 4 * 1024 * 1024

# `platform.machine()` -> GOARCH and the variant an image for this machine carries.
_MACHINES: Final[dict[str, tuple[str, str]]] = {
    "x86_64": ("amd64", ""),
    "amd64": ("amd64", ""),
    "aarch64": ("arm64", "v8"),
    "arm64": ("arm64", "v8"),
    "armv7l": ("arm", "v7"),
    "armv6l": ("arm", "v6"),
    "i386": ("386", ""),
    "i686": ("386", ""),
    "ppc64le": ("ppc64le", ""),
    "s390x": ("s390x", ""),
    "riscv64": ("riscv64", ""),
}


@dataclass(frozen=True)
class Platform:
    """An image's platform, as an index names it."""

    os: str
    architecture: str
    variant: str = ""

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)


@dataclass(frozen=True)
class Descriptor:
    """A pointer to a blob: its media type, digest and size (and platform, in an index)."""

    media_type: str
    digest: str
    size: int
    platform: Platform | None = None
    annotations: tuple[tuple[str, str], ...] = ()

    def annotation(self, key: str) -> str | None:
        return dict(self.annotations).get(key)


@dataclass(frozen=True)
class Manifest:
    """An image manifest: its config and layers, lowest first."""

    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]


@dataclass(frozen=True)
class Index:
    """A multi-platform index (or Docker manifest list)."""

    media_type: str
    manifests: tuple[Descriptor, ...]


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of some bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verify_digest(data: bytes, digest: str, *, what: str) -> None:
    """Raise :class:`DigestMismatch` unless ``data`` hashes to ``digest`` (sha256 or sha512)."""
    algorithm, expected = parse_digest(digest)
    actual = hashlib.new(algorithm, data).hexdigest()
    if actual != expected:
        raise DigestMismatch(digest, f"{algorithm}:{actual}", what=what)


def node_platform(machine: str | None = None) -> Platform:
    """The platform of this node: linux and the GOARCH-style name of ``platform.machine()``."""
    machine = machine or _platform.machine()
    arch, variant = _MACHINES.get(machine.lower(), (machine.lower(), ""))
    return Platform("linux", arch, variant)


def media_type_of(raw: bytes, declared: str | None = None) -> str:
    """The manifest's media type: the ``mediaType`` field, else what the source declared."""
    doc = _load(raw)
    media_type = doc.get("mediaType") or declared or ""
    if not media_type:
        # An OCI manifest without mediaType (allowed before image-spec 1.1): tell by shape.
        media_type = OCI_INDEX if "manifests" in doc else OCI_MANIFEST
    if doc.get("schemaVersion") == 1 or "prettyjws" in media_type:
        raise ManifestError(
            "a Docker schema 1 manifest: that format is retired; push the image again with a "
            "current docker, podman, buildah or skopeo"
        )
    return str(media_type)


def parse_manifest(raw: bytes) -> Manifest:
    """Read an image manifest (OCI or Docker schema 2).

    Raises:
        ManifestError: not a manifest, an artifact that is not a container image, a bad digest.
    """
    media_type = media_type_of(raw)
    if media_type not in MANIFEST_TYPES:
        raise ManifestError(f"expected an image manifest, got {media_type!r}")
    doc = _load(raw)
    config = _descriptor(doc.get("config"))
    if config.media_type not in CONFIG_TYPES:
        raise ManifestError(
            f"this is not a container image: its config is {config.media_type!r} (an OCI "
            "artifact such as a Helm chart or a signature?); name a container image instead"
        )
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise ManifestError("the manifest has no 'layers' list")
    parsed = tuple(_descriptor(layer) for layer in layers)
    for layer in parsed:
        if layer.media_type not in LAYER_TYPES:
            raise ManifestError(
                f"layer {layer.digest} has media type {layer.media_type!r}, which the node does "
                "not unpack (tar, tar+gzip and tar+zstd are supported)"
            )
    return Manifest(media_type, config, parsed)


def parse_index(raw: bytes) -> Index:
    """Read a multi-platform index (OCI index or Docker manifest list)."""
    media_type = media_type_of(raw)
    if media_type not in INDEX_TYPES:
        raise ManifestError(f"expected an index, got {media_type!r}")
    entries = _load(raw).get("manifests")
    if not isinstance(entries, list):
        raise ManifestError("the index has no 'manifests' list")
    return Index(media_type, tuple(_descriptor(entry) for entry in entries))


def select_platform(index: Index, want: Platform | None = None) -> Descriptor:
    """The index entry for ``want`` (the node's platform by default).

    An exact variant wins; an entry without a variant comes next (``arm64`` images
    often omit ``v8``). Attestations and other non-image entries are skipped.

    Raises:
        PlatformNotFound: no entry for the platform; the message lists those there are.
    """
    want = want or node_platform()
    candidates = [
        d
        for d in index.manifests
        if d.platform is not None
        and d.media_type in MANIFEST_TYPES | INDEX_TYPES
        and d.platform.os == want.os
        and d.platform.architecture == want.architecture
    ]
    for variant in (want.variant, ""):
        for entry in candidates:
            if entry.platform is not None and entry.platform.variant == variant:
                return entry
    if candidates and not want.variant:
        return candidates[0]
    offered = sorted({str(d.platform) for d in index.manifests if d.platform is not None})
    raise PlatformNotFound(
        f"the image has no build for this node's platform {want} (it offers "
        f"{', '.join(offered) or 'no platforms'}); pick an image built for {want}"
    )


def _load(raw: bytes) -> Mapping[str, Any]:
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"a manifest of {len(raw)} bytes, over the {MAX_MANIFEST_BYTES} limit")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"the manifest is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ManifestError("the manifest is not a JSON object")
    return doc


def _descriptor(value: object) -> Descriptor:
    if not isinstance(value, Mapping):
        raise ManifestError(f"a descriptor must be an object, not {value!r}")
    media_type, digest, size = value.get("mediaType"), value.get("digest"), value.get("size")
    if not isinstance(media_type, str) or not isinstance(digest, str):
        raise ManifestError(f"a descriptor without mediaType or digest: {dict(value)!r}")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ManifestError(f"descriptor {digest}: bad size {size!r}")
    try:
        parse_digest(digest)
    except ValueError as exc:
        raise ManifestError(f"descriptor: {exc}") from None
    plat = value.get("platform")
    platform = None
    if isinstance(plat, Mapping):
        platform = Platform(
            str(plat.get("os", "")), str(plat.get("architecture", "")), str(plat.get("variant", ""))
        )
    notes = value.get("annotations") or {}
    annotations = (
        tuple((str(k), str(v)) for k, v in notes.items()) if isinstance(notes, Mapping) else ()
    )
    return Descriptor(media_type, digest, size, platform, annotations)
