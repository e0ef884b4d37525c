"""Handles on baked templates (``TemplateHandle``) and the ``Template`` namespace, sync and async."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from collimate_rl.templates._bake_ops import (
    _attach_op,
    _bake_op,
    _HandleInfo,
    _status_op,
    _wait_op,
)
from collimate_rl.templates._clients import _on_node
from collimate_rl.templates._ready import Ready
from collimate_rl.templates._status import TemplateStatus
from collimate_rl.wire._operations import adrive, drive

__all__ = ["AsyncTemplate", "AsyncTemplateHandle", "Template", "TemplateHandle"]

H = TypeVar("H", "TemplateHandle", "AsyncTemplateHandle")


class _HandleBase:
    def __init__(
        self,
        client: Any,
        template_id: str,
        *,
        name: str = "",
        image: str = "",
        declared: int = 0,
        bake_mode: str = "",
    ) -> None:
        self.client = client
        self.id = template_id
        self.name = name
        self.image = image
        self.declared = declared
        self.bake_mode = bake_mode

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, declared={self.declared})"

    def _info(self) -> _HandleInfo:
        return _HandleInfo(
            self.id,
            self.name,
            self.image,
            self.declared,
            self.bake_mode,
            on_node=_on_node(self.client),
        )


class TemplateHandle(_HandleBase):
    """A baked (or baking) template: on the gateway, or on our node (live once baked).

    Args:
        client: a gateway client, or a client of our node.
        template_id: the template's id.
        name, image, declared, bake_mode: what the bake said; they fill in
            fields the server reports as empty or 0.

    >>> class Gateway:  # stands in for GatewayClient here
    ...     def get_template(self, template_id):
    ...         return {"id": template_id, "phase": "Live", "warm": 2,
    ...                 "converge_state": "converged"}
    >>> status = TemplateHandle(Gateway(), "tpl-1", declared=2).wait(timeout=5)
    >>> status.phase, status.declared, status.warm
    ('Live', 2, 2)
    """

    def status(self) -> TemplateStatus:
        """One ``GET /v1/templates/{id}``, backfilled from the handle."""
        return drive(_status_op(self._info()), self.client)

    def wait(
        self,
        timeout: float = 600.0,
        *,
        poll_interval: float = 1.0,
        on_update: Callable[[TemplateStatus], None] | None = None,
        fail_fast: bool = True,
    ) -> TemplateStatus:
        """Poll until the template has converged; return its last status.

        Polls at once, then every ``poll_interval`` seconds. Converged wins over
        a stale error.

        Raises:
            TemplateBakeFailed: (``fail_fast``) phase ``Failed`` while not
                converged, or the template vanished (404) during the wait.
            TimeoutError: not converged within ``timeout`` seconds.
        """
        op = _wait_op(self._info(), timeout, poll_interval, on_update, fail_fast)
        return drive(op, self.client)


class AsyncTemplateHandle(_HandleBase):
    """The async twin of :class:`TemplateHandle` (on an async client)."""

    async def status(self) -> TemplateStatus:
        """See :meth:`TemplateHandle.status`."""
        return await adrive(_status_op(self._info()), self.client)

    async def wait(
        self,
        timeout: float = 600.0,
        *,
        poll_interval: float = 1.0,
        on_update: Callable[[TemplateStatus], None] | None = None,
        fail_fast: bool = True,
    ) -> TemplateStatus:
        """See :meth:`TemplateHandle.wait`."""
        op = _wait_op(self._info(), timeout, poll_interval, on_update, fail_fast)
        return await adrive(op, self.client)


def _handle(cls: type[H], client: Any, info: _HandleInfo) -> H:
    return cls(
        client,
        info.id,
        name=info.name,
        image=info.image,
        declared=info.declared,
        bake_mode=info.bake_mode,
    )


class Template:
    """Bake, inspect and attach to templates, on the gateway or our node (static methods).

    >>> class Gateway:  # stands in for GatewayClient here
    ...     def create_template(self, **kw):
    ...         return {"id": "tpl-9", "name": kw["name"], "image": kw["image"]}
    ...     def expect_width(self, template_id, width): ...
    >>> handle = Template.bake(Gateway(), name="np", image="python:3.12",
    ...                        ready=Ready(cmd="python3 -c 'import numpy'"), width=8)
    >>> handle.id, handle.declared
    ('tpl-9', 8)
    """

    @staticmethod
    def bake(
        client: Any,
        *,
        name: str,
        image: str,
        ready: Ready | None = None,
        width: int,
        cold_fraction: int = 0,
    ) -> TemplateHandle:
        """Bake ``image`` into a template with a warm pool of ``width``; don't wait.

        On a local node ``image`` is the base template, or an OCI image reference
        (``ghcr.io/org/task:1``, ``oci:DIR[:tag]``: the node pulls it and its root
        filesystem is every session's ``/``), and ``ready`` is read as described in
        docs/services.md (``cmd`` with ``ports``: a server each session runs; without: a
        setup command, run once, over an image in its root as its user with its
        ``/bin/sh``; ``network``: the setup's network and the template's).

        Raises:
            CollimateUsageError: the client can bake neither way (or, on a node,
                ``ready`` has no ``cmd``).
        """
        op = _bake_op(
            client, name=name, image=image, ready=ready, width=width, cold_fraction=cold_fraction
        )
        return _handle(TemplateHandle, client, drive(op, client))

    @staticmethod
    def status(client: Any, template_id: str) -> TemplateStatus:
        """One status read of ``template_id``."""
        return drive(_status_op(_HandleInfo(template_id, on_node=_on_node(client))), client)

    @staticmethod
    def attach(client: Any, template_id: str) -> TemplateHandle:
        """A handle on an existing template (one read, which also checks it exists).

        Raises:
            CollimateNotFoundError: no such template (the gateway's 404, or the node's list).
        """
        info = _HandleInfo(template_id, on_node=_on_node(client))
        return _handle(TemplateHandle, client, drive(_attach_op(info), client))


class AsyncTemplate:
    """The async twin of :class:`Template` (on an async client)."""

    @staticmethod
    async def bake(
        client: Any,
        *,
        name: str,
        image: str,
        ready: Ready | None = None,
        width: int,
        cold_fraction: int = 0,
    ) -> AsyncTemplateHandle:
        """See :meth:`Template.bake`."""
        op = _bake_op(
            client, name=name, image=image, ready=ready, width=width, cold_fraction=cold_fraction
        )
        return _handle(AsyncTemplateHandle, client, await adrive(op, client))

    @staticmethod
    async def status(client: Any, template_id: str) -> TemplateStatus:
        """See :meth:`Template.status`."""
        return await adrive(_status_op(_HandleInfo(template_id, on_node=_on_node(client))), client)

    @staticmethod
    async def attach(client: Any, template_id: str) -> AsyncTemplateHandle:
        """See :meth:`Template.attach`."""
        info = _HandleInfo(template_id, on_node=_on_node(client))
        return _handle(AsyncTemplateHandle, client, await adrive(_attach_op(info), client))
