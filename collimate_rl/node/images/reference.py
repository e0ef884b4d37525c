"""Image references: every form a user may type, parsed into one of three kinds.

- :class:`RegistryReference`: ``host[:port]/repo[:tag][@digest]``, ``docker://...``, and
  Docker Hub short names (``python:3.12-slim`` is ``docker.io/library/python:3.12-slim``);
- :class:`LayoutReference`: ``oci:DIR[:tag]`` and ``oci-archive:FILE[:tag]``;
- :class:`DockerArchiveReference`: ``docker-archive:FILE[:name:tag]`` (what ``docker save`` writes).

``str()`` of a parsed reference is its canonical form, and parsing it again gives an
equal value.

>>> ref = parse_reference("python:3.12-slim")
>>> str(ref), ref.api_host, ref.manifest_reference
('docker.io/library/python:3.12-slim', 'registry-1.docker.io', '3.12-slim')
>>> parse_reference("oci:/srv/images/app:v1")
LayoutReference(transport='oci', path='/srv/images/app', tag='v1')
>>> parse_reference("Python")
Traceback (most recent call last):
...
collimate_rl.node.images.errors.ImageReferenceError: 'Python': a repository name is lowercase letters, digits and separators (. _ __ -), like 'python' or 'org/app'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from collimate_rl.node.images.errors import ImageReferenceError

__all__ = [
    "DOCKER_HUB",
    "DockerArchiveReference",
    "ImageReference",
    "LayoutReference",
    "RegistryReference",
    "parse_digest",
    "parse_reference",
]

#: The canonical name of Docker Hub in references, and the host its API answers on.
DOCKER_HUB: Final = "docker.io"
_DOCKER_HUB_API: Final = "registry-1.docker.io"
# Other spellings of Docker Hub that users and config files carry.
_DOCKER_HUB_ALIASES: Final = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*\Z")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_LABEL = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)"
_HOST = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{{1,5}})?\Z")
_DIGESTS: Final = {
    "sha256": re.compile(r"[a-f0-9]{64}\Z"),
    "sha512": re.compile(r"[a-f0-9]{128}\Z"),
}
# Docker's limit on the whole name (registry and repository).
_MAX_NAME = 255


@dataclass(frozen=True)
class RegistryReference:
    """An image in a registry.

    Attributes:
        registry: ``host[:port]`` as written (``docker.io`` for Docker Hub, however spelt).
        repository: the path, ``library/python`` for a Docker Hub short name.
        tag: the tag; ``latest`` when neither tag nor digest was given; ``None`` for a
            digest-only reference.
        digest: ``sha256:<hex>`` (or sha512) when pinned.

    >>> r = parse_reference("127.0.0.1:5000/team/app:v2@sha256:" + "0" * 64)
    >>> r.registry, r.repository, r.tag, r.manifest_reference[:9]
    ('127.0.0.1:5000', 'team/app', 'v2', 'sha256:00')
    """

    registry: str
    repository: str
    tag: str | None = "latest"
    digest: str | None = None

    @property
    def api_host(self) -> str:
        """Where the registry's API answers: ``registry-1.docker.io`` for Docker Hub."""
        return _DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def hostname(self) -> str:
        """The registry's host without the port (and without IPv6 brackets)."""
        host = self.registry.rsplit(":", 1)[0] if self.registry.count(":") == 1 else self.registry
        if host.startswith("["):
            host = host[1 : host.index("]")]
        return host

    @property
    def manifest_reference(self) -> str:
        """What goes after ``/manifests/``: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def name(self) -> str:
        """``registry/repository`` with neither tag nor digest."""
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        text = self.name
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text


@dataclass(frozen=True)
class LayoutReference:
    """An OCI image layout: a directory (``oci:``) or a tar of one (``oci-archive:``).

    Attributes:
        transport: ``"oci"`` or ``"oci-archive"``.
        path: the directory or the archive, as given.
        tag: the ``org.opencontainers.image.ref.name`` to pick; ``None`` when the layout
            holds one image.
    """

    transport: Literal["oci", "oci-archive"]
    path: str
    tag: str | None = None

    def __str__(self) -> str:
        return f"{self.transport}:{self.path}" + (f":{self.tag}" if self.tag is not None else "")


@dataclass(frozen=True)
class DockerArchiveReference:
    """A ``docker save`` tarball; ``name`` picks one of its ``RepoTags`` when it holds several.

    >>> parse_reference("docker-archive:/tmp/app.tar:app:v1")
    DockerArchiveReference(path='/tmp/app.tar', name='app:v1')
    """

    path: str
    name: str | None = None

    def __str__(self) -> str:
        return f"docker-archive:{self.path}" + (f":{self.name}" if self.name is not None else "")


ImageReference: TypeAlias = RegistryReference | LayoutReference | DockerArchiveReference


def parse_reference(text: str) -> ImageReference:
    """Parse any reference form the node accepts.

    Raises:
        ImageReferenceError: an empty, malformed or unknown-transport reference.
    """
    if not isinstance(text, str) or not text.strip():
        raise ImageReferenceError("an image reference must be a non-empty string")
    if text != text.strip() or "\0" in text:
        raise ImageReferenceError(f"{text!r}: no surrounding spaces or NUL bytes in a reference")
    transport, sep, rest = text.partition(":")
    if sep and transport in ("oci", "oci-archive"):
        path, tag = _split_path(text, rest)
        if tag is not None and not tag:
            raise ImageReferenceError(f"{text!r}: the tag after the path is empty")
        return LayoutReference(transport, path, tag)  # type: ignore[arg-type]
    if sep and transport == "docker-archive":
        path, name = _split_path(text, rest)
        if name is not None:
            _parse_registry(name, original=text)  # the name must be a valid reference
        return DockerArchiveReference(path, name)
    if sep and rest.startswith("//"):
        if transport != "docker":
            raise ImageReferenceError(
                f"{text!r}: unknown transport {transport!r}; use docker://, oci:, oci-archive: "
                "or docker-archive:, or a plain registry reference"
            )
        return _parse_registry(rest[2:], original=text)
    return _parse_registry(text, original=text)


def parse_digest(text: str) -> tuple[str, str]:
    """Split ``algorithm:hex`` and check it (sha256 or sha512, lowercase hex).

    >>> parse_digest("sha256:" + "f" * 64)[0]
    'sha256'
    """
    algorithm, _, encoded = text.partition(":")
    pattern = _DIGESTS.get(algorithm)
    if pattern is None or not pattern.match(encoded):
        raise ImageReferenceError(
            f"{text!r} is not a digest: expected sha256:<64 hex> or sha512:<128 hex>"
        )
    return algorithm, encoded


def _split_path(text: str, rest: str) -> tuple[str, str | None]:
    # As skopeo does: the path ends at its first colon; what follows names the image.
    path, sep, suffix = rest.partition(":")
    if not path:
        raise ImageReferenceError(f"{text!r}: the path after the transport is empty")
    return path, (suffix if sep else None)


def _parse_registry(text: str, *, original: str) -> RegistryReference:
    rest, at, digest = text.partition("@")
    if at:
        _check_digest(digest, original)
    # A colon after the last slash starts the tag (a colon before it is a port).
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    tag: str | None = None
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.match(tag):
            raise ImageReferenceError(
                f"{original!r}: bad tag {tag!r}; a tag is up to 128 letters, digits, '_', '.' "
                "or '-', not starting with '.' or '-'"
            )
    registry, repository = _split_registry(rest)
    for component in repository.split("/"):
        if not _COMPONENT.match(component):
            raise ImageReferenceError(
                f"{original!r}: a repository name is lowercase letters, digits and separators "
                "(. _ __ -), like 'python' or 'org/app'"
            )
    if len(registry) + 1 + len(repository) > _MAX_NAME:
        raise ImageReferenceError(f"{original!r}: the name is longer than {_MAX_NAME} characters")
    if tag is None and not at:
        tag = "latest"
    return RegistryReference(registry, repository, tag, digest if at else None)


def _check_digest(digest: str, original: str) -> None:
    try:
        parse_digest(digest)
    except ImageReferenceError as exc:
        raise ImageReferenceError(f"{original!r}: {exc}") from None


def _split_registry(name: str) -> tuple[str, str]:
    first, slash, remainder = name.partition("/")
    # The first component names a registry only when it looks like a host, as Docker decides.
    if slash and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        if not _HOST.match(first):
            raise ImageReferenceError(f"{name!r}: {first!r} is not a registry host[:port]")
        port = first.rsplit(":", 1)[1] if first.count(":") == 1 or "]:" in first else None
        if port is not None and not 0 < int(port) < 65536:
            raise ImageReferenceError(f"{name!r}: port {port} is out of range")
        registry, repository = first, remainder
        if registry.lower() in _DOCKER_HUB_ALIASES:
            registry = DOCKER_HUB
    else:
        registry, repository = DOCKER_HUB, name
    if not repository:
        raise ImageReferenceError(f"{name!r}: no repository after the registry")
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    return registry, repository
