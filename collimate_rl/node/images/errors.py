"""The image errors: one tree for references, pulls, local sources and the store.

Every error here derives from :class:`ImageError`::

    ImageError (Exception)
    ├── ImageReferenceError (also ValueError)  a reference that cannot be parsed
    ├── ImageConfigError (also ValueError)     an image config that is not valid JSON of the spec
    ├── ImagePullError                         fetching or reading an image failed
    │   ├── ImageNotFound                      no such repository, tag, digest or file
    │   ├── RegistryAuthError                  credentials missing, refused or not accepted
    │   ├── RegistryError                      the registry is unreachable or answers oddly
    │   ├── ManifestError                      a manifest or index we cannot use
    │   │   └── PlatformNotFound               an index without the node's platform
    │   └── DigestMismatch                     content does not hash to its digest
    └── ImageStoreError                        the store cannot keep or unpack an image
        ├── QuotaExceeded                      the store would grow past its max bytes
        └── LayerError                         a layer that cannot be unpacked safely

The node maps them onto its error envelope; the messages are written for the
person who typed the reference and say what to do next.

>>> err = DigestMismatch("sha256:" + "a" * 64, "sha256:" + "b" * 64, what="layer")
>>> isinstance(err, ImagePullError), err.expected[:10]
(True, 'sha256:aaa')
"""

from __future__ import annotations

__all__ = [
    "DigestMismatch",
    "ImageConfigError",
    "ImageError",
    "ImageNotFound",
    "ImagePullError",
    "ImageReferenceError",
    "ImageStoreError",
    "LayerError",
    "ManifestError",
    "PlatformNotFound",
    "QuotaExceeded",
    "RegistryAuthError",
    "RegistryError",
]


class ImageError(Exception):
    """Root of every image error."""


class ImageReferenceError(ImageError, ValueError):
    """A reference that cannot be parsed (``python:3.12-slim``, ``oci:DIR:tag``, ...)."""


class ImageConfigError(ImageError, ValueError):
    """An image config blob that is not the JSON the OCI or Docker spec describes."""


class ImagePullError(ImageError):
    """Fetching an image from a registry, or reading it from a local source, failed."""


class ImageNotFound(ImagePullError):
    """The repository, tag, digest, layout or archive does not exist."""


class RegistryAuthError(ImagePullError):
    """The registry wants credentials we do not have, or refused the ones we sent."""


class RegistryError(ImagePullError):
    """The registry could not be reached, or answered with something we cannot use."""


class ManifestError(ImagePullError):
    """A manifest or index that is malformed or of a media type we do not handle."""


class PlatformNotFound(ManifestError):
    """A multi-platform index that lists no image for the node's platform."""


class DigestMismatch(ImagePullError):
    """Bytes that do not hash to the digest that names them.

    Args:
        expected: the digest the manifest (or the caller) named.
        actual: the digest of the bytes received.
        what: what the bytes were ("layer", "config", "manifest", a file name).
    """

    def __init__(self, expected: str, actual: str, *, what: str = "blob") -> None:
        super().__init__(
            f"{what} {expected} arrived as {actual}: the content was changed in transit or at "
            "the source; nothing was kept. Pull again; if it repeats, the source is corrupt."
        )
        self.expected = expected
        self.actual = actual
        self.what = what


class ImageStoreError(ImageError):
    """The image store cannot keep, find or unpack what it was asked to."""


class QuotaExceeded(ImageStoreError):
    """Keeping the blob would grow the store past its ``max_bytes``.

    Args:
        needed: bytes the store would hold after the write.
        limit: the store's ``max_bytes``.
    """

    def __init__(self, needed: int, limit: int) -> None:
        super().__init__(
            f"the image store would hold {needed} bytes, over its limit of {limit}: prune "
            "unused images (collimate images prune) or raise --image-store-max-bytes"
        )
        self.needed = needed
        self.limit = limit


class LayerError(ImageStoreError):
    """A layer that cannot be unpacked safely (an escape, a bomb, an unknown media type)."""
