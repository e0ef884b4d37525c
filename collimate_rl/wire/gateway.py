"""Clients of the managed gateway (``https://api.collimate.ai``), Bearer ``col_*`` keys.

Besides the gateway's own surface (images, templates, sandboxes, fork,
suspend/resume, connect URLs, usage) both clients offer the daemon's session
surface (``create_session``, ``session_exec``, ``exec_once``, ``get_session``,
``list_sessions``, ``delete_session``, ``fork_session``) so that code written
against :class:`~collimate_rl.wire.daemon.CollimateClient` works unchanged.

>>> gw = GatewayClient("col_demo_abcd1234_" + "s" * 32, "https://gw.example/pfx/")
>>> gw.tier, gw.fork_cap, gw.base
('demo', 4, 'https://gw.example/pfx')
>>> gw.connect_url("sb1", 70000)
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: port must be an int in 1..65535, got 70000
"""

from __future__ import annotations

import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import httpx

from collimate_rl.errors import CollimateUsageError
from collimate_rl.wire import _gateway_flows as _g
from collimate_rl.wire._base import AsyncClientBase, ClientBase, SyncClientBase, check_url
from collimate_rl.wire._env import ENV_API_KEY, ENV_BASE_URL
from collimate_rl.wire._gateway_flows import DEFAULT_GATEWAY_URL, fork_cap, parse_tier
from collimate_rl.wire._transport import make_async_http, make_sync_http
from collimate_rl.wire.models import (
    ConnectURL,
    CreateSessionResponse,
    DeleteResponse,
    ExecResponse,
    ForkResponse,
    Health,
    ImageInfo,
    SessionInfo,
    StateResponse,
    TemplateInfo,
    Usage,
)

__all__ = ["AsyncGatewayClient", "GatewayClient"]

Files = Sequence[Mapping[str, str]]
Commands = Sequence[Sequence[str]]
Stamp = str | datetime | None


class _GatewaySettings(ClientBase):
    _gateway = True

    def _init_gateway(self, api_key: str | None, base_url: str | None) -> dict[str, str]:
        key = api_key or os.environ.get(ENV_API_KEY)
        if not key:
            raise CollimateUsageError(
                f"an API key is required: pass api_key=... or set {ENV_API_KEY}"
            )
        self.api_key = key
        #: ``demo``, ``pro``, ``ent``, or None for a key without a known tier.
        self.tier = parse_tier(key)
        #: The most children one fork call may ask for (demo 4, pro 32, ent 64; else 32).
        self.fork_cap = fork_cap(self.tier)
        origin = base_url or os.environ.get(ENV_BASE_URL) or DEFAULT_GATEWAY_URL
        self.base = check_url(origin)
        return {"Authorization": f"Bearer {key}"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self.base!r}, tier={self.tier!r})"


class GatewayClient(_GatewaySettings, SyncClientBase):
    """Blocking client of the managed gateway.

    Args:
        api_key: a ``col_<tier>_<id8>_<secret32>`` key; default ``$COLLIMATE_API_KEY``.
        base_url: the gateway origin (a path is kept as a prefix); default
            ``$COLLIMATE_BASE_URL``, then ``https://api.collimate.ai``.
        timeout, retries, backoff, retry_budget: as for
            :class:`~collimate_rl.wire.daemon.CollimateClient`.
        transport, sleep, rng: injection points for tests.

    Retries: idempotent requests retry on 500/502/503/504 and transport errors
    (429 is *not* retried); creates, execs and forks retry only on
    ``at_capacity`` or a refused connection. ``demo_tier_limit``,
    ``quota_exceeded``, ``forbidden``, ``unauthorized``, ``not_found`` and
    ``bad_request`` are never retried.

    >>> gw = GatewayClient("sk-not-a-collimate-key", "http://127.0.0.1:9")
    >>> gw.tier, gw.fork_cap
    (None, 32)
    >>> gw.exec("sb1", code="print(1)", seed="not-hex")
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: seed must be 64 hex characters, got 'not-hex'
    >>> gw.close()
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.15,
        retry_budget: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._init_settings(timeout, retries, backoff, retry_budget, rng)
        headers = self._init_gateway(api_key, base_url)
        if sleep is not None:
            self._sleep = sleep
        self._http = make_sync_http(
            transport=transport,
            headers=headers,
            trust_env=True,
            tls=self.base.startswith("https:"),
        )

    @classmethod
    def from_env(cls, **kw: Any) -> GatewayClient:
        """The same as ``GatewayClient(**kw)`` (the key and origin come from the env)."""
        return cls(**kw)

    # -- catalog and templates

    def health(self) -> Health:
        """``GET /v1/health``."""
        return self._run(_g.health(self._ctx()))

    def images(self) -> list[ImageInfo]:
        """The image catalog (``visibility == "public"`` rows are the shared catalog)."""
        return self._run(_g.images(self._ctx()))

    list_images = images

    def create_template(
        self,
        *,
        name: str,
        image: str,
        ready: Any = None,
        env: Mapping[str, str] | None = None,
        width: int,
        cold_fraction: int = 0,
        expected_width: int | None = None,
    ) -> TemplateInfo:
        """Bake ``image`` into a template with a warm pool of ``width``.

        ``ready`` is a ReadySpec dict (``cmd``, ``http``, ``http_timeout_s``,
        ``ports``, ``env``, ``network``) or an object with ``to_wire()``; ``env``
        is merged into ``ready.env`` (explicit ``ready["env"]`` keys win).
        """
        flow = _g.create_template(
            self._ctx(),
            name=name,
            image=image,
            ready=ready,
            env=env,
            width=width,
            cold_fraction=cold_fraction,
            expected_width=expected_width,
        )
        return self._run(flow)

    def get_template(self, template_id: str) -> TemplateInfo:
        """The bake and pool status of a template (404 ``not_found`` if unknown)."""
        return self._run(_g.get_template(self._ctx(), template_id))

    def list_templates(self) -> list[TemplateInfo]:
        """Your templates and the public ones."""
        return self._run(_g.list_templates(self._ctx()))

    def delete_template(self, template_id: str) -> DeleteResponse:
        """Delete a template you baked (shared catalog rows raise 403)."""
        return self._run(_g.delete_template(self._ctx(), template_id))

    def expect_width(self, template_id: str, width: int) -> StateResponse:
        """Declare the warm width you expect to use (clamped to the plan's limit)."""
        return self._run(_g.expect_width(self._ctx(), template_id, width))

    def release_template(self, template_id: str) -> StateResponse:
        """Release a declared width so the pool can decay."""
        return self._run(_g.release_template(self._ctx(), template_id))

    # -- sandboxes

    def create_sandbox(
        self,
        template: str,
        *,
        label: str | None = None,
        labels: Mapping[str, str] | None = None,
        egress: Mapping[str, Any] | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> CreateSessionResponse:
        """Create a sandbox from ``template`` (``session_id`` aliases ``id``)."""
        flow = _g.create_sandbox(
            self._ctx(),
            template,
            label=label,
            labels=labels,
            egress=egress,
            secret_refs=secret_refs,
        )
        return self._run(flow)

    def list_sandboxes(self) -> list[SessionInfo]:
        """Your live sandboxes."""
        return self._run(_g.list_sandboxes(self._ctx()))

    def get_sandbox(self, sandbox_id: str) -> SessionInfo:
        """One sandbox (``session_id``/``template_id`` aliases added)."""
        return self._run(_g.get_sandbox(self._ctx(), sandbox_id))

    def exec(
        self,
        sandbox_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
    ) -> ExecResponse:
        """Run ``command``/``code``/``commands`` in a sandbox (files are written first)."""
        flow = _g.exec_(
            self._ctx(),
            sandbox_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        return self._run(flow)

    def fork(
        self,
        sandbox_id: str,
        *,
        count: int = 1,
        labels: Sequence[str] | None = None,
        max_per_call: int | None = None,
    ) -> ForkResponse:
        """Fork ``count`` children, in calls of at most ``max_per_call`` (default: the tier cap).

        All or nothing: a short chunk raises ``ForkShortError``, and on any
        error every child created so far is deleted first.
        """
        cap = max_per_call or self.fork_cap
        return self._run(_g.fork(self._ctx(), sandbox_id, count=count, labels=labels, cap=cap))

    def suspend(self, sandbox_id: str) -> StateResponse:
        """Suspend a sandbox (its meter pauses)."""
        return self._run(_g.suspend(self._ctx(), sandbox_id))

    def resume(self, sandbox_id: str) -> StateResponse:
        """Resume a suspended sandbox."""
        return self._run(_g.resume(self._ctx(), sandbox_id))

    def delete_sandbox(self, sandbox_id: str) -> DeleteResponse:
        """Delete a sandbox. Never raises: failures give ``deleted == False``."""
        return self._run(_g.delete_sandbox(self._ctx(), sandbox_id))

    def connect_url(
        self, sandbox_id: str, port: int, *, ttl_seconds: int = 600, protocol: str = "tcp"
    ) -> ConnectURL:
        """Mint a host->guest URL for ``port`` (Pro/Ent); ``ttl_seconds`` is clamped to 1..3600."""
        flow = _g.connect_url(
            self._ctx(), sandbox_id, port, ttl_seconds=ttl_seconds, protocol=protocol
        )
        return self._run(flow)

    def cdp_url(self, sandbox_id: str, *, ttl_seconds: int = 600) -> str:
        """A Chrome DevTools URL for the guest's browser on port 9222."""
        return self._run(_g.cdp_url(self._ctx(), sandbox_id, ttl_seconds=ttl_seconds))

    def usage(self, *, from_ts: Stamp = None, to_ts: Stamp = None) -> Usage:
        """Usage totals over ``[from_ts, to_ts]`` (RFC 3339 strings or datetimes)."""
        return self._run(_g.usage(self._ctx(), from_ts, to_ts))

    # -- the daemon-parity session surface

    def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None
    ) -> CreateSessionResponse:
        """:meth:`create_sandbox` without a label."""
        return self.create_sandbox(template_id, egress=egress)

    def get_session(self, session_id: str) -> SessionInfo:
        """:meth:`get_sandbox`."""
        return self.get_sandbox(session_id)

    def list_sessions(self) -> list[SessionInfo]:
        """:meth:`list_sandboxes`."""
        return self.list_sandboxes()

    def delete_session(self, session_id: str) -> DeleteResponse:
        """:meth:`delete_sandbox` (never raises)."""
        return self.delete_sandbox(session_id)

    def fork_session(self, session_id: str, count: int) -> ForkResponse:
        """:meth:`fork` with the tier's cap."""
        return self.fork(session_id, count=count)

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
        """:meth:`exec`."""
        return self.exec(
            session_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )

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
        """Create a sandbox, exec once, and always delete it, even when the exec fails.

        Each in-flight call holds one of the tier's concurrency slots.
        """
        flow = _g.exec_once(
            self._ctx(),
            template_id,
            egress=egress,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        return self._run(flow)


class AsyncGatewayClient(_GatewaySettings, AsyncClientBase):
    """The async twin of :class:`GatewayClient` (same arguments and methods).

    >>> AsyncGatewayClient("col_ent_abcd1234_" + "s" * 32).fork_cap
    64
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.15,
        retry_budget: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._init_settings(timeout, retries, backoff, retry_budget, rng)
        headers = self._init_gateway(api_key, base_url)
        if sleep is not None:
            self._sleep = sleep
        self._http = make_async_http(
            transport=transport,
            headers=headers,
            trust_env=True,
            tls=self.base.startswith("https:"),
        )

    @classmethod
    def from_env(cls, **kw: Any) -> AsyncGatewayClient:
        """The same as ``AsyncGatewayClient(**kw)``."""
        return cls(**kw)

    async def health(self) -> Health:
        """See :meth:`GatewayClient.health`."""
        return await self._run(_g.health(self._ctx()))

    async def images(self) -> list[ImageInfo]:
        """See :meth:`GatewayClient.images`."""
        return await self._run(_g.images(self._ctx()))

    list_images = images

    async def create_template(
        self,
        *,
        name: str,
        image: str,
        ready: Any = None,
        env: Mapping[str, str] | None = None,
        width: int,
        cold_fraction: int = 0,
        expected_width: int | None = None,
    ) -> TemplateInfo:
        """See :meth:`GatewayClient.create_template`."""
        flow = _g.create_template(
            self._ctx(),
            name=name,
            image=image,
            ready=ready,
            env=env,
            width=width,
            cold_fraction=cold_fraction,
            expected_width=expected_width,
        )
        return await self._run(flow)

    async def get_template(self, template_id: str) -> TemplateInfo:
        """See :meth:`GatewayClient.get_template`."""
        return await self._run(_g.get_template(self._ctx(), template_id))

    async def list_templates(self) -> list[TemplateInfo]:
        """See :meth:`GatewayClient.list_templates`."""
        return await self._run(_g.list_templates(self._ctx()))

    async def delete_template(self, template_id: str) -> DeleteResponse:
        """See :meth:`GatewayClient.delete_template`."""
        return await self._run(_g.delete_template(self._ctx(), template_id))

    async def expect_width(self, template_id: str, width: int) -> StateResponse:
        """See :meth:`GatewayClient.expect_width`."""
        return await self._run(_g.expect_width(self._ctx(), template_id, width))

    async def release_template(self, template_id: str) -> StateResponse:
        """See :meth:`GatewayClient.release_template`."""
        return await self._run(_g.release_template(self._ctx(), template_id))

    async def create_sandbox(
        self,
        template: str,
        *,
        label: str | None = None,
        labels: Mapping[str, str] | None = None,
        egress: Mapping[str, Any] | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> CreateSessionResponse:
        """See :meth:`GatewayClient.create_sandbox`."""
        flow = _g.create_sandbox(
            self._ctx(),
            template,
            label=label,
            labels=labels,
            egress=egress,
            secret_refs=secret_refs,
        )
        return await self._run(flow)

    async def list_sandboxes(self) -> list[SessionInfo]:
        """See :meth:`GatewayClient.list_sandboxes`."""
        return await self._run(_g.list_sandboxes(self._ctx()))

    async def get_sandbox(self, sandbox_id: str) -> SessionInfo:
        """See :meth:`GatewayClient.get_sandbox`."""
        return await self._run(_g.get_sandbox(self._ctx(), sandbox_id))

    async def exec(
        self,
        sandbox_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
    ) -> ExecResponse:
        """See :meth:`GatewayClient.exec`."""
        flow = _g.exec_(
            self._ctx(),
            sandbox_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        return await self._run(flow)

    async def fork(
        self,
        sandbox_id: str,
        *,
        count: int = 1,
        labels: Sequence[str] | None = None,
        max_per_call: int | None = None,
    ) -> ForkResponse:
        """See :meth:`GatewayClient.fork`."""
        cap = max_per_call or self.fork_cap
        flow = _g.fork(self._ctx(), sandbox_id, count=count, labels=labels, cap=cap)
        return await self._run(flow)

    async def suspend(self, sandbox_id: str) -> StateResponse:
        """See :meth:`GatewayClient.suspend`."""
        return await self._run(_g.suspend(self._ctx(), sandbox_id))

    async def resume(self, sandbox_id: str) -> StateResponse:
        """See :meth:`GatewayClient.resume`."""
        return await self._run(_g.resume(self._ctx(), sandbox_id))

    async def delete_sandbox(self, sandbox_id: str) -> DeleteResponse:
        """See :meth:`GatewayClient.delete_sandbox` (never raises)."""
        return await self._run(_g.delete_sandbox(self._ctx(), sandbox_id))

    async def connect_url(
        self, sandbox_id: str, port: int, *, ttl_seconds: int = 600, protocol: str = "tcp"
    ) -> ConnectURL:
        """See :meth:`GatewayClient.connect_url`."""
        flow = _g.connect_url(
            self._ctx(), sandbox_id, port, ttl_seconds=ttl_seconds, protocol=protocol
        )
        return await self._run(flow)

    async def cdp_url(self, sandbox_id: str, *, ttl_seconds: int = 600) -> str:
        """See :meth:`GatewayClient.cdp_url`."""
        return await self._run(_g.cdp_url(self._ctx(), sandbox_id, ttl_seconds=ttl_seconds))

    async def usage(self, *, from_ts: Stamp = None, to_ts: Stamp = None) -> Usage:
        """See :meth:`GatewayClient.usage`."""
        return await self._run(_g.usage(self._ctx(), from_ts, to_ts))

    async def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None
    ) -> CreateSessionResponse:
        """See :meth:`GatewayClient.create_session`."""
        return await self.create_sandbox(template_id, egress=egress)

    async def get_session(self, session_id: str) -> SessionInfo:
        """See :meth:`GatewayClient.get_session`."""
        return await self.get_sandbox(session_id)

    async def list_sessions(self) -> list[SessionInfo]:
        """See :meth:`GatewayClient.list_sessions`."""
        return await self.list_sandboxes()

    async def delete_session(self, session_id: str) -> DeleteResponse:
        """See :meth:`GatewayClient.delete_session` (never raises)."""
        return await self.delete_sandbox(session_id)

    async def fork_session(self, session_id: str, count: int) -> ForkResponse:
        """See :meth:`GatewayClient.fork_session`."""
        return await self.fork(session_id, count=count)

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
        """See :meth:`GatewayClient.session_exec`."""
        return await self.exec(
            session_id,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )

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
        """See :meth:`GatewayClient.exec_once`."""
        flow = _g.exec_once(
            self._ctx(),
            template_id,
            egress=egress,
            command=command,
            code=code,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        return await self._run(flow)
