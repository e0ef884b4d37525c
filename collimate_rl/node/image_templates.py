"""The node's images: pull a reference into its store and make it a template.

``POST /v1/templates {"template_id", "image"}`` pulls the image (a registry reference,
``oci:DIR[:tag]``, ``oci-archive:FILE[:tag]``, ``docker-archive:FILE``) into the node's
image store, records that the template uses it, and registers an image template
(``runtime.base.ImageRoot``: its sessions see the image's root filesystem as ``/``). With
``setup`` (and ``ready.cmd`` without ports, one more setup command), the commands run once
in the image's root and their result is one more layer of the template
(``LocalRuntime.bake_image``).
``GET /v1/images`` lists the store's images, ``POST /v1/images/prune`` removes those no
template uses. A pull under way reports its bytes in :attr:`NodeImages.pulls` (``GET
/v1/images/pulls``), which the CLI draws as a progress bar.

The node is one holder of the store's records of use (``images/_store_holders.py``): it
releases them when it stops cleanly (:meth:`NodeImages.close`), and when it starts it deletes
those of holders that are gone (a node that was killed), keeping those of nodes that run
(:meth:`NodeImages.release_gone`).

>>> ImageSettings().resolved_store_dir().name
'images'
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from collimate_rl.node.errors import NodeError, one_line
from collimate_rl.node.images.errors import (
    ImageError,
    ImageNotFound,
    ImagePullError,
    QuotaExceeded,
)
from collimate_rl.node.images.pull import canonical_reference, pull_image
from collimate_rl.node.images.store import ImageRecord, ImageStore
from collimate_rl.node.models import ReadySpec
from collimate_rl.node.runtime.base import ImageRoot, ServiceSpec

__all__ = [
    "ImageSettings",
    "NodeImages",
    "image_error",
    "image_root",
    "image_service",
    "image_setup",
]


@dataclass(frozen=True)
class ImageSettings:
    """Where the node keeps images and how it may fetch them (the ``serve`` flags).

    Attributes:
        store_dir: the image store (``--image-store``); ``None``: ``images`` under the
            cache dir (``COLLIMATE_CACHE_DIR``, else ``~/.cache/collimate-rl``).
        max_bytes: the store's quota (``--image-store-max-bytes``); ``None``: none.
        insecure_registries: registries spoken to in plain HTTP (``--insecure-registry``;
            loopback ones always are).
    """

    store_dir: Path | None = None
    max_bytes: int | None = None
    insecure_registries: tuple[str, ...] = ()

    def resolved_store_dir(self) -> Path:
        if self.store_dir is not None:
            return Path(self.store_dir)
        explicit = os.environ.get("COLLIMATE_CACHE_DIR")
        if explicit:
            return Path(explicit) / "images"
        xdg = os.environ.get("XDG_CACHE_HOME")
        return (Path(xdg) if xdg else Path.home() / ".cache") / "collimate-rl" / "images"


def image_root(record: ImageRecord) -> ImageRoot:
    """The runtime's view of a stored image (its layers and the config it honours)."""
    cfg = record.config
    return ImageRoot(
        layers=tuple(record.layer_dirs),
        env=tuple(cfg.env),
        working_dir=cfg.working_dir or "/",
        user=cfg.user,
        entrypoint=tuple(cfg.entrypoint),
        cmd=tuple(cfg.cmd),
        ref=record.ref,
    )


def image_setup(setup: list[str], ready: ReadySpec | None) -> list[str]:
    """An image bake's setup commands: ``setup``, then ``ready.cmd`` when it has no ports
    (a setup command then, as over a ``python3`` base; the gateway's ``WARM_CMD``).

    >>> image_setup(["apt-get update"], ReadySpec(cmd="make"))
    ['apt-get update', 'make']
    >>> image_setup([], ReadySpec(cmd="srv", ports=[8000]))
    []
    """
    if ready is not None and ready.cmd and not ready.ports:
        return [*setup, ready.cmd]
    return list(setup)


def image_service(
    ready: ReadySpec | None, root: ImageRoot
) -> tuple[ServiceSpec | None, tuple[tuple[str, str], ...]]:
    """An image template's service and env from a bake's ``ready``: with ``ports``, the
    server is ``ready.cmd`` (run by ``/bin/sh -c``), else the image's ``Entrypoint`` +
    ``Cmd``, run directly (no shell needed), as ``docker run`` would. Without ports there is
    no service (``ready.cmd`` is a setup command then: :func:`image_setup`).

    >>> root = ImageRoot(layers=(), cmd=("python3", "-m", "http.server", "8000"))
    >>> service, env = image_service(ReadySpec(ports=[8000], http="/"), root)
    >>> service.argv, service.cmd, env
    (('python3', '-m', 'http.server', '8000'), 'python3 -m http.server 8000', ())
    """
    if ready is None:
        return None, ()
    env = tuple(sorted(ready.env.items()))
    if ready.http and not ready.ports:
        raise NodeError("bad_request", "ready.http needs ready.ports (the port it is served on)")
    if not ready.ports:
        return None, env
    ports = tuple(dict.fromkeys(ready.ports))
    timeout = float(ready.http_timeout_s or 60.0)
    if ready.cmd:
        return ServiceSpec(cmd=ready.cmd, ports=ports, http=ready.http, http_timeout_s=timeout), env
    argv = (*root.entrypoint, *root.cmd)
    if not argv:
        raise NodeError(
            "bad_request",
            f"image {root.ref!r} has no Entrypoint or Cmd: give ready.cmd, the server to start",
        )
    cmd = shlex.join(argv)
    return ServiceSpec(cmd, ports, http=ready.http, http_timeout_s=timeout, argv=argv), env


def image_error(ref: str, exc: Exception) -> NodeError:
    """A pull's failure as the node's error envelope (never a 500 for a bad image)."""
    what = f"image {ref!r}: {one_line(exc, limit=400)}"
    if isinstance(exc, ImageNotFound):
        return NodeError("not_found", what)
    if isinstance(exc, QuotaExceeded):
        return NodeError("quota_exceeded", what)
    if isinstance(exc, ImagePullError):
        return NodeError("upstream_error", what)
    return NodeError("bad_request", what)


class PullMetrics(Protocol):
    """Where the node counts image pulls (``NodeMetrics``; docs/operations.md)."""

    def image_pull(self, outcome: str, pulled_bytes: int = 0) -> None: ...
    def set_store_bytes(self, total: int) -> None: ...


class NodeImages:
    """The node's image store, opened on first use, and its pulls under way."""

    def __init__(
        self, settings: ImageSettings | None = None, metrics: PullMetrics | None = None
    ) -> None:
        self.settings = settings or ImageSettings()
        self._metrics = metrics
        self._store: ImageStore | None = None
        #: reference -> {"done", "total", "what", "started"} of each pull under way
        self.pulls: dict[str, dict[str, Any]] = {}

    @property
    def store(self) -> ImageStore:
        if self._store is None:
            self._store = ImageStore(
                self.settings.resolved_store_dir(), max_bytes=self.settings.max_bytes
            )
        return self._store

    async def pull(self, ref: str) -> ImageRecord:
        """Pull ``ref`` into the store (fetching only what it lacks).

        Raises:
            NodeError: a bad reference or image (400), not found (404), a registry's
                failure (502), the store's quota (402).
        """
        try:
            key = canonical_reference(ref)
        except (ImageError, ValueError) as exc:
            raise image_error(ref, exc) from exc
        state: dict[str, Any] = {"done": 0, "total": 0, "what": "", "started": time.time()}
        self.pulls[key] = state

        def progress(done: int, total: int, what: str) -> None:
            state.update(done=done, total=total, what=what)  # (read by GET /v1/images/pulls)

        try:
            result = await asyncio.to_thread(
                pull_image,
                ref,
                self.store,
                insecure_registries=self.settings.insecure_registries,
                progress=progress,
            )
        except (ImageError, ValueError, OSError) as exc:
            if self._metrics is not None:
                self._metrics.image_pull("error")
            raise image_error(ref, exc) from exc
        finally:
            self.pulls.pop(key, None)
        if self._metrics is not None:
            # "cached": every layer was in the store already (a manifest may still be read)
            outcome = "ok" if result.layers_fetched else "cached"
            self._metrics.image_pull(outcome, result.bytes_fetched)
            self._metrics.set_store_bytes(await asyncio.to_thread(self.store.total_bytes))
        return result.record

    def use(self, ref: str, template_id: str) -> None:
        self.store.use(ref, template_id)

    def release(self, template_id: str) -> None:
        self.store.release(template_id)

    def release_gone(self) -> list[str]:
        """Delete the records of use of holders that are gone (at the node's start); their
        ids. Nothing, and no store made, if the store does not exist yet."""
        if self._store is None and not self.settings.resolved_store_dir().is_dir():
            return []
        return self.store.release_gone()

    def close(self) -> None:
        """Release this node's records of use (a clean stop): prune may take the images."""
        if self._store is not None:
            self._store.close()

    def rows(self) -> list[dict[str, Any]]:
        """The store's images, as ``GET /v1/images`` lists them."""
        if self._store is None and not self.settings.resolved_store_dir().is_dir():
            return []
        return [
            {
                "id": rec.ref,
                "name": rec.ref,
                "image": rec.ref,
                "visibility": "private",
                "digest": rec.manifest_digest,
                "layers": len(rec.layers),
                "size_bytes": rec.size_bytes,
                "used_by": list(rec.used_by),
            }
            for rec in self.store.images()
        ]

    async def prune(self) -> dict[str, Any]:
        """Remove the images no template uses (and what only they used)."""
        report = await asyncio.to_thread(self.store.prune)
        return {
            "images": list(report.images),
            "layers": len(report.layers),
            "blobs": len(report.blobs),
            "freed_bytes": report.freed_bytes,
        }
