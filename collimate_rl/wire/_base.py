"""What every client shares: settings, the call context, and the two I/O drivers."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import httpx

from collimate_rl.errors import CollimateUsageError
from collimate_rl.wire._core import (
    CallContext,
    Flow,
    RawResponse,
    Request,
    RetryPolicy,
    default_async_sleep,
    default_sleep,
    run_async,
    run_sync,
)
from collimate_rl.wire._environments import environment_factories
from collimate_rl.wire._http11 import AsyncNodeHTTP, NodeHTTP
from collimate_rl.wire._transport import async_send, sync_send

__all__ = ["AsyncClientBase", "ClientBase", "SyncClientBase", "check_url"]

T = TypeVar("T")
S = TypeVar("S", bound="SyncClientBase")
A = TypeVar("A", bound="AsyncClientBase")


def check_url(url: str, what: str = "base_url") -> str:
    """Validate an ``http(s)://`` URL and strip a trailing ``/``."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise CollimateUsageError(f"{what} must be an http:// or https:// URL, got {url!r}")
    return url.rstrip("/")


class ClientBase:
    """Settings shared by all clients; read on every call, so they may be changed later.

    Attributes:
        base: the URL prefix every path is appended to.
        timeout: the flat socket timeout in seconds (execs wait longer).
        retries: retries after the first attempt.
        backoff: the base of the full-jitter exponential backoff, in seconds.
        retry_budget: the most a call may sleep across its retries, in seconds.
    """

    base: str
    _gateway: bool = False

    def _init_settings(
        self,
        timeout: float,
        retries: int,
        backoff: float,
        retry_budget: float,
        rng: random.Random | None,
    ) -> None:
        if not timeout > 0:
            raise CollimateUsageError(f"timeout must be > 0, got {timeout!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise CollimateUsageError(f"retries must be an int >= 0, got {retries!r}")
        if backoff < 0 or retry_budget < 0:
            raise CollimateUsageError("backoff and retry_budget must be >= 0")
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.retry_budget = float(retry_budget)
        self._rng = rng or random.Random()

    def _ctx(self) -> CallContext:
        policy = RetryPolicy(
            retries=self.retries,
            backoff=self.backoff,
            retry_budget=self.retry_budget,
            gateway=self._gateway,
            rng=self._rng,
        )
        return CallContext(timeout=self.timeout, policy=policy)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self.base!r})"


class SyncClientBase(ClientBase):
    """Blocking I/O: one pooled client (httpx, or a daemon's ``NodeHTTP``); a context manager."""

    _http: httpx.Client | NodeHTTP
    _sleep: Callable[[float], None] = staticmethod(default_sleep)

    def _run(self, flow: Flow[T]) -> T:
        return run_sync(flow, self._send, self._sleep)

    def _send(self, req: Request) -> RawResponse:
        return sync_send(self._http, self.base, req)

    def env(
        self,
        ref: str,
        *,
        width: int | None = None,
        name: str | None = None,
        ready: Any = None,
        env: Any = None,
        secrets: Any = None,
    ) -> Any:
        """An environment (template + declared width) as a context manager that releases it.

        Made by :func:`collimate_rl.templates.environment`, which the layer above
        provides (see :mod:`collimate_rl.wire._environments`): the wire layer does
        not import it.
        """
        make = environment_factories()[0]
        return make(self, ref, width=width, name=name, ready=ready, env=env, secrets=secrets)

    def close(self) -> None:
        """Close the pooled connections (idempotent)."""
        self._http.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClientBase(ClientBase):
    """Async I/O: one pooled client (httpx, or ``AsyncNodeHTTP``); an async context manager."""

    _http: httpx.AsyncClient | AsyncNodeHTTP
    _sleep: Callable[[float], Awaitable[None]] = staticmethod(default_async_sleep)

    async def _run(self, flow: Flow[T]) -> T:
        return await run_async(flow, self._send, self._sleep)

    async def _send(self, req: Request) -> RawResponse:
        return await async_send(self._http, self.base, req)

    async def env(
        self,
        ref: str,
        *,
        width: int | None = None,
        name: str | None = None,
        ready: Any = None,
        env: Any = None,
        secrets: Any = None,
    ) -> Any:
        """The async twin of :meth:`SyncClientBase.env` (returns an ``AsyncEnv``)."""
        make = environment_factories()[1]
        return await make(self, ref, width=width, name=name, ready=ready, env=env, secrets=secrets)

    async def aclose(self) -> None:
        """Close the pooled connections (idempotent)."""
        await self._http.aclose()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
