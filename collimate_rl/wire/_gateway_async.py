"""The async client of the managed gateway (:class:`AsyncGatewayClient`)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from collimate_rl.wire import _gateway_flows as _g
from collimate_rl.wire._base import AsyncClientBase
from collimate_rl.wire._gateway_settings import Commands, Files, Stamp, _GatewaySettings
from collimate_rl.wire._transport import make_async_http
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

__all__ = ["AsyncGatewayClient"]


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
