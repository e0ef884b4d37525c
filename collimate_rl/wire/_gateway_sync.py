"""The blocking client of the managed gateway (:class:`GatewayClient`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from collimate_rl.wire import _gateway_flows as _g
from collimate_rl.wire._base import SyncClientBase
from collimate_rl.wire._gateway_settings import Commands, Files, Stamp, _GatewaySettings
from collimate_rl.wire._transport import make_sync_http
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

__all__ = ["GatewayClient"]


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
