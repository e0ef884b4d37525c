"""Clients of the node-local daemon (``serve``), over TCP or a unix socket.

Both clients drive the same flows (:mod:`collimate_rl.wire._daemon_flows`);
they differ only in blocking vs async I/O.

>>> client = CollimateClient("http://127.0.0.1:8080/", retries=0)
>>> client.base, client.retries, client.unix_socket
('http://127.0.0.1:8080', 0, None)
>>> client.session_exec("s1", files=[{"path": "/tmp/a.py", "content": "x = 1"}])
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: one of command/code/commands is required
>>> client.close()
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from collimate_rl.wire import _daemon_flows as _d
from collimate_rl.wire._base import AsyncClientBase, SyncClientBase, check_url
from collimate_rl.wire._env import DEFAULT_SESSION_SOCKET, resolve_transport
from collimate_rl.wire._transport import (
    UDS_BASE,
    make_async_node_http,
    make_node_http,
    node_auth_headers,
)
from collimate_rl.wire.models import (
    CreateSessionResponse,
    DeleteResponse,
    ExecResponse,
    ForkResponse,
    Health,
    ImageInfo,
    SessionInfo,
)

__all__ = ["AsyncCollimateClient", "CollimateClient"]

C = TypeVar("C", "CollimateClient", "AsyncCollimateClient")

Files = Sequence[Mapping[str, str]]
Commands = Sequence[Sequence[str]]


def _from_env(cls: type[C], **kw: Any) -> C:
    found = resolve_transport(allow_gateway=False)
    if found.kind == "daemon_uds":
        return cls(unix_socket=found.target, **kw)
    return cls(found.target or "", **kw)


class CollimateClient(SyncClientBase):
    """Blocking client of the node-local daemon.

    Args:
        base_url: the daemon's URL (ignored when ``unix_socket`` is given).
        timeout: flat socket timeout in seconds; an exec waits
            ``max(timeout, timeout_seconds + 30)``.
        retries: retries after the first attempt.
        backoff: full-jitter exponential backoff base, in seconds.
        retry_budget: the most one call may sleep across retries, in seconds.
        unix_socket: dial this unix socket instead of TCP.
        transport: an ``httpx.BaseTransport`` to use instead (tests, proxies).
        sleep: the sleep used between retries (default ``time.sleep``).
        rng: the RNG for backoff jitter.
        token: the node's bearer token (``collimate serve --token-file``);
            default ``$COLLIMATE_SERVE_TOKEN``; none: no ``Authorization`` header.

    Idempotent requests (GET, DELETE) retry on 429/5xx and transport errors.
    Creates and execs retry only when the node proves nothing ran
    (``at_capacity``, ``session_bringup_failed``, ``draining``) or the
    connection was refused; never after an ambiguous failure.

    >>> with CollimateClient.for_node_socket("/run/x/serve.sock") as c:
    ...     c.base, c.unix_socket
    ('http://localhost', '/run/x/serve.sock')
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.15,
        retry_budget: float = 30.0,
        unix_socket: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
        token: str | None = None,
    ) -> None:
        self._init_settings(timeout, retries, backoff, retry_budget, rng)
        self.unix_socket = unix_socket
        self.base = UDS_BASE if unix_socket else check_url(base_url)
        if sleep is not None:
            self._sleep = sleep
        self._http = make_node_http(
            self.base,
            unix_socket=unix_socket,
            transport=transport,
            headers=node_auth_headers(token),
        )

    @classmethod
    def from_env(cls, **kw: Any) -> CollimateClient:
        """From ``$COLLIMATE_SERVE_SOCKET``, ``$COLLIMATE_SERVE_URL``, the default socket
        if it exists, else ``http://127.0.0.1:8080``.

        >>> import os; os.environ["COLLIMATE_SERVE_URL"] = "http://10.0.0.5:8080"
        >>> CollimateClient.from_env(retries=1).base
        'http://10.0.0.5:8080'
        >>> del os.environ["COLLIMATE_SERVE_URL"]
        """
        return _from_env(cls, **kw)

    @classmethod
    def for_node_socket(cls, path: str = DEFAULT_SESSION_SOCKET, **kw: Any) -> CollimateClient:
        """A client over the node's session socket (the in-pod hot path)."""
        return cls(unix_socket=path, **kw)

    def health(self) -> Health:
        """``GET /v1/health``: status (``ok``/``draining``), load, templates, version."""
        return self._run(_d.health(self._ctx()))

    def templates(self) -> list[str]:
        """The template ids this node serves (from its health)."""
        return self._run(_d.templates(self._ctx()))

    def images(self) -> list[ImageInfo]:
        """Always raises: the image catalog is gateway only.

        >>> CollimateClient().images()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        collimate_rl.errors.CollimateError: images() is gateway only: ...
        """
        raise _d.images_unsupported()

    list_images = images

    def list_sessions(self) -> list[SessionInfo]:
        """``GET /v1/sessions``: every live session on the node."""
        return self._run(_d.list_sessions(self._ctx()))

    def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None
    ) -> CreateSessionResponse:
        """Fork a session from ``template_id`` (``POST /v1/sessions``)."""
        return self._run(_d.create_session(self._ctx(), template_id, egress))

    def get_session(self, session_id: str) -> SessionInfo:
        """``GET /v1/sessions/{id}``; 404 ``no_such_session`` raises."""
        return self._run(_d.get_session(self._ctx(), session_id))

    def delete_session(self, session_id: str) -> DeleteResponse:
        """``DELETE /v1/sessions/{id}``. Never raises: failures give ``deleted == False``."""
        return self._run(_d.delete_session(self._ctx(), session_id))

    def session_exec(
        self,
        session_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
    ) -> ExecResponse:
        """Run ``command``/``code``/``commands`` in a session (files are written first)."""
        flow = _d.session_exec(
            self._ctx(),
            session_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        return self._run(flow)

    def exec_once(
        self,
        template_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
        egress: Mapping[str, Any] | None = None,
    ) -> ExecResponse:
        """One-shot exec in an ephemeral fork of ``template_id`` (``POST /v1/exec``)."""
        flow = _d.exec_once(
            self._ctx(),
            template_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
            egress=egress,
        )
        return self._run(flow)

    def fork_session(self, session_id: str, count: int) -> ForkResponse:
        """Fork a session ``count`` ways (all or nothing); children keep its files."""
        return self._run(_d.fork_session(self._ctx(), session_id, count))

    def exec_batch(self, items: Sequence[Mapping[str, Any]]) -> list[_d.BatchResult]:
        """Many execs in one request (our local node's extension); per item a response or error.

        Each item is ``session_exec``'s keyword arguments plus ``session_id``,
        or ``exec_once``'s plus ``template_id``. Raises ``CollimateNotFoundError``
        where the node has no such extension (a real daemon).
        """
        return self._run(_d.exec_batch(self._ctx(), items))

    def delete_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Delete many sessions in one request (our local node's extension); the ids deleted."""
        return self._run(_d.delete_sessions(self._ctx(), session_ids))

    def bake_template(
        self,
        template_id: str,
        setup: Sequence[str],
        *,
        base: str = "python3",
        network: bool = False,
        timeout: float | None = 900.0,
        ready: Mapping[str, Any] | None = None,
        egress: Mapping[str, Any] | None = None,
        image: str | None = None,
    ) -> dict[str, Any]:
        """Bake ``setup`` commands over ``base`` into a new template (our local node's extension).

        The commands run once, as the operator's, with network only if ``network``;
        every session of the new template starts from their result. ``ready``
        (a gateway ReadySpec dict: ``cmd``, ``ports``, ``http``,
        ``http_timeout_s``, ``env``) makes every session run ``cmd`` as a
        server on ``ports`` (its ``endpoints``); ``setup`` may then be empty.
        ``network`` also makes the template networked (its sessions take an
        ``egress`` policy; ``setup`` may be empty) and ``egress`` is its default
        policy (docs/egress.md). ``image`` (an OCI image reference: ``host/repo:tag``,
        ``oci:DIR[:tag]``, ``oci-archive:FILE``, ``docker-archive:FILE``) instead of ``base``:
        the node pulls it into its image store and every session sees its root filesystem
        as ``/``; ``setup`` then runs once in that root, with the image's ``/bin/sh -c`` as
        the image's user (its ``Env`` and ``WorkingDir``), and its result is one more layer
        of the template.
        """
        return self._run(
            _d.bake_template(
                self._ctx(), template_id, setup, base, network, timeout, ready, egress, image
            )
        )

    def store_images(self) -> list[dict[str, Any]]:
        """The images in our local node's image store (``GET /v1/images``): each row's ``id``
        (the reference), ``size_bytes`` and ``used_by`` (template ids)."""
        return self._run(_d.store_images(self._ctx()))

    def image_pulls(self) -> dict[str, Any]:
        """Our local node's pulls under way: reference -> ``{done, total, what}`` bytes."""
        return self._run(_d.image_pulls(self._ctx()))

    def prune_images(self) -> dict[str, Any]:
        """Remove the images no template of our local node uses; what was removed."""
        return self._run(_d.prune_images(self._ctx()))


class AsyncCollimateClient(AsyncClientBase):
    """The async twin of :class:`CollimateClient` (same arguments and methods).

    >>> client = AsyncCollimateClient(unix_socket="/run/x/serve.sock")
    >>> client.base
    'http://localhost'
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.15,
        retry_budget: float = 30.0,
        unix_socket: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
        token: str | None = None,
    ) -> None:
        self._init_settings(timeout, retries, backoff, retry_budget, rng)
        self.unix_socket = unix_socket
        self.base = UDS_BASE if unix_socket else check_url(base_url)
        if sleep is not None:
            self._sleep = sleep
        self._http = make_async_node_http(
            self.base,
            unix_socket=unix_socket,
            transport=transport,
            headers=node_auth_headers(token),
        )

    @classmethod
    def from_env(cls, **kw: Any) -> AsyncCollimateClient:
        """See :meth:`CollimateClient.from_env`."""
        return _from_env(cls, **kw)

    @classmethod
    def for_node_socket(cls, path: str = DEFAULT_SESSION_SOCKET, **kw: Any) -> AsyncCollimateClient:
        """See :meth:`CollimateClient.for_node_socket`."""
        return cls(unix_socket=path, **kw)

    async def health(self) -> Health:
        """See :meth:`CollimateClient.health`."""
        return await self._run(_d.health(self._ctx()))

    async def templates(self) -> list[str]:
        """See :meth:`CollimateClient.templates`."""
        return await self._run(_d.templates(self._ctx()))

    async def images(self) -> list[ImageInfo]:
        """Always raises: the image catalog is gateway only."""
        raise _d.images_unsupported()

    list_images = images

    async def list_sessions(self) -> list[SessionInfo]:
        """See :meth:`CollimateClient.list_sessions`."""
        return await self._run(_d.list_sessions(self._ctx()))

    async def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None
    ) -> CreateSessionResponse:
        """See :meth:`CollimateClient.create_session`."""
        return await self._run(_d.create_session(self._ctx(), template_id, egress))

    async def get_session(self, session_id: str) -> SessionInfo:
        """See :meth:`CollimateClient.get_session`."""
        return await self._run(_d.get_session(self._ctx(), session_id))

    async def delete_session(self, session_id: str) -> DeleteResponse:
        """See :meth:`CollimateClient.delete_session` (never raises)."""
        return await self._run(_d.delete_session(self._ctx(), session_id))

    async def session_exec(
        self,
        session_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
    ) -> ExecResponse:
        """See :meth:`CollimateClient.session_exec`."""
        flow = _d.session_exec(
            self._ctx(),
            session_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        return await self._run(flow)

    async def exec_once(
        self,
        template_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
        egress: Mapping[str, Any] | None = None,
    ) -> ExecResponse:
        """See :meth:`CollimateClient.exec_once`."""
        flow = _d.exec_once(
            self._ctx(),
            template_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
            egress=egress,
        )
        return await self._run(flow)

    async def fork_session(self, session_id: str, count: int) -> ForkResponse:
        """See :meth:`CollimateClient.fork_session`."""
        return await self._run(_d.fork_session(self._ctx(), session_id, count))

    async def exec_batch(self, items: Sequence[Mapping[str, Any]]) -> list[_d.BatchResult]:
        """See :meth:`CollimateClient.exec_batch`."""
        return await self._run(_d.exec_batch(self._ctx(), items))

    async def delete_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """See :meth:`CollimateClient.delete_sessions`."""
        return await self._run(_d.delete_sessions(self._ctx(), session_ids))

    async def bake_template(
        self,
        template_id: str,
        setup: Sequence[str],
        *,
        base: str = "python3",
        network: bool = False,
        timeout: float | None = 900.0,
        ready: Mapping[str, Any] | None = None,
        egress: Mapping[str, Any] | None = None,
        image: str | None = None,
    ) -> dict[str, Any]:
        """See :meth:`CollimateClient.bake_template`."""
        return await self._run(
            _d.bake_template(
                self._ctx(), template_id, setup, base, network, timeout, ready, egress, image
            )
        )

    async def store_images(self) -> list[dict[str, Any]]:
        """See :meth:`CollimateClient.store_images`."""
        return await self._run(_d.store_images(self._ctx()))

    async def image_pulls(self) -> dict[str, Any]:
        """See :meth:`CollimateClient.image_pulls`."""
        return await self._run(_d.image_pulls(self._ctx()))

    async def prune_images(self) -> dict[str, Any]:
        """See :meth:`CollimateClient.prune_images`."""
        return await self._run(_d.prune_images(self._ctx()))
