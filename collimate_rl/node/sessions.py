"""The session registry: ids, bookkeeping, the cap, the TTL reaper, the warm pool, fork.

The registry owns every :class:`~collimate_rl.node.runtime.base.SessionHandle`
the node hands out. A small pool of sessions per template is created ahead of
time, so a create is usually a warm hit (``fork_time_ms`` of 0).

A networked session gets its egress gate (the node side of its proxy, see
:mod:`collimate_rl.node.egress.gate`) when it is handed out, with the policy
of that create (pooled sessions have none: their relay reaches nothing); its
forks get gates with the same policy; the gate closes with the session.

>>> new_session_id().startswith("ses_"), len(new_session_id())
(True, 28)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from collimate_rl.node.egress.gate import EgressGate
from collimate_rl.node.egress.policy import EgressPolicy
from collimate_rl.node.egress.settings import EgressSettings
from collimate_rl.node.errors import NodeError, one_line
from collimate_rl.node.runtime.base import (
    Runtime,
    RuntimeError_,
    ServiceNotReady,
    SessionBusy,
    SessionHandle,
    SessionLost,
)

__all__ = ["SessionRecord", "SessionRegistry", "new_session_id"]

logger = logging.getLogger("collimate_rl.node")


def new_session_id() -> str:
    """A fresh ``ses_<24 hex>`` id."""
    return f"ses_{secrets.token_hex(12)}"


def _ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


@dataclass
class SessionRecord:
    """One live session and its bookkeeping (times are ``time.monotonic()``)."""

    session_id: str
    template_id: str
    handle: SessionHandle
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    exec_count: int = 0
    active: int = 0
    forking: asyncio.Event | None = None
    egress: EgressGate | None = None

    def info(self, now: float | None = None, *, detail: bool = False) -> dict[str, object]:
        """The contract's SessionInfo; with ``detail``, a networked session's ``egress`` too."""
        now = time.monotonic() if now is None else now
        body: dict[str, object] = {
            "session_id": self.session_id,
            "template_id": self.template_id,
            "age_secs": round(now - self.created, 3),
            "idle_secs": round(0.0 if self.active else now - self.last_used, 3),
            "exec_count": self.exec_count,
        }
        if detail and self.egress is not None:
            body["egress"] = self.egress.info()
        return body


def _last_use(rec: SessionRecord) -> float:
    """The later of the last exec and the last use of the session's service ports."""
    service_use = getattr(rec.handle, "last_service_use", None)
    used = service_use() if callable(service_use) else None
    return rec.last_used if used is None else max(rec.last_used, used)


class SessionRegistry:
    """Sessions by id, bounded by ``max_sessions``, reaped after ``ttl_seconds`` idle.

    Args:
        runtime: the sandbox runtime (already started).
        max_sessions: live sessions allowed (the warm pool is not counted).
        ttl_seconds: idle time after which a session is reaped; ``None`` or
            ``<= 0`` disables reaping.
        pool_size: warm sessions kept per template (0 disables the pool).
        egress: the node's egress settings (for networked sessions' gates).
        on_egress: told every egress proxy decision of every session (the metrics).
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        max_sessions: int = 256,
        ttl_seconds: float | None = 600.0,
        pool_size: int = 2,
        egress: EgressSettings | None = None,
        on_egress: Callable[[str, str], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.on_egress = on_egress
        self.egress_settings = egress or EgressSettings()
        self.max_sessions = max_sessions
        self.ttl_seconds = ttl_seconds if ttl_seconds and ttl_seconds > 0 else None
        self.pool_size = max(0, pool_size)
        self._sessions: dict[str, SessionRecord] = {}
        self._reserved = 0
        self._pool: dict[str, deque[SessionHandle]] = {}
        self._refills: dict[str, asyncio.Task[None]] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        #: closes of sessions whose creator was cancelled mid-bring-up
        self._orphans: set[asyncio.Task[None]] = set()

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        """Start the reaper and fill the warm pool in the background.

        Only the first (built-in) template is warmed eagerly; any other gets
        its pool after its first create, so aliases and unused templates
        cost nothing.
        """
        if self.ttl_seconds is not None:
            self._reaper = asyncio.create_task(
                self._reap_forever(self.ttl_seconds), name="session-reaper"
            )
        for template_id in self.runtime.templates()[:1]:
            self._schedule_refill(template_id)

    async def close(self) -> None:
        """Stop background tasks and destroy every session, pooled ones too. Idempotent."""
        self._closed = True
        tasks = [t for t in (self._reaper, *self._refills.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._refills.clear()
        await asyncio.gather(*self._orphans, return_exceptions=True)
        records = list(self._sessions.values())
        self._sessions.clear()
        handles: list[SessionHandle] = []
        for pool in self._pool.values():
            handles.extend(pool)
            pool.clear()
        await self._close_records(records)
        await self._close_handles(handles)

    # -- queries ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self._sessions)

    def records(self) -> list[SessionRecord]:
        """Live sessions, oldest first."""
        return sorted(self._sessions.values(), key=lambda rec: rec.created)

    def get(self, session_id: str) -> SessionRecord:
        """The session, or ``no_such_session`` (404)."""
        rec = self._sessions.get(session_id)
        if rec is None:
            raise NodeError(
                "no_such_session", f"no session {session_id!r} (never created, deleted or reaped)"
            )
        return rec

    def pooled(self, template_id: str) -> int:
        """Warm sessions ready for ``template_id``."""
        return len(self._pool.get(template_id, ()))

    def check_template(self, template_id: str) -> None:
        """Raise ``no_template`` (404) unless the runtime knows ``template_id``."""
        known = self.runtime.templates()
        if template_id not in known:
            why = dict(getattr(self.runtime, "unavailable_templates", dict)()).get(template_id)
            raise NodeError(
                "no_template",
                f"template {template_id!r} is not available on this node: {why}"
                if why
                else f"unknown template {template_id!r}; available: {', '.join(sorted(known))}",
            )

    # -- create / delete -------------------------------------------------

    def _reserve(self, count: int) -> None:
        if len(self._sessions) + self._reserved + count > self.max_sessions:
            raise NodeError(
                "at_capacity",
                f"session cap reached ({self.max_sessions} sessions); "
                "delete idle sessions or retry later",
            )
        self._reserved += count

    async def create(
        self, template_id: str, *, egress: EgressPolicy | None = None
    ) -> tuple[SessionRecord, float, float]:
        """Create a session; returns ``(record, fork_time_ms, create_time_ms)``.

        ``egress``: the policy of a networked session's gate (the node decides
        it, see ``Node.egress_for``); ignored for a session without network.
        """
        start = time.perf_counter()
        self.check_template(template_id)
        self._reserve(1)
        try:
            pool = self._pool.get(template_id)
            if pool:
                handle = pool.popleft()
                fork_ms = 0.0
            else:
                fork_start = time.perf_counter()
                handle = await self._bring_up(template_id, new_session_id())
                fork_ms = _ms_since(fork_start)
            rec = SessionRecord(handle.session_id, template_id, handle)
            await self._open_gates([rec], egress)
            self._sessions[rec.session_id] = rec
        finally:
            self._reserved -= 1
        self._schedule_refill(template_id)
        return rec, fork_ms, _ms_since(start)

    async def _bring_up(self, template_id: str, session_id: str) -> SessionHandle:
        # Shielded: a request cancelled mid-create (its client left) must not
        # leave a sandbox the master started but nobody registered; the
        # bring-up finishes and its session is closed.
        bring_up = asyncio.ensure_future(self.runtime.create_session(template_id, session_id))
        try:
            return await asyncio.shield(bring_up)
        except asyncio.CancelledError:
            bring_up.add_done_callback(self._close_orphan)
            raise
        except KeyError as exc:
            raise NodeError("no_template", f"unknown template {template_id!r}") from exc
        except ServiceNotReady as exc:  # not retryable: the template's server is broken
            raise NodeError("service_not_ready", one_line(exc, limit=2400)) from exc
        except RuntimeError_ as exc:
            raise NodeError(
                "session_bringup_failed", f"could not start a session: {one_line(exc)}"
            ) from exc

    def _close_orphan(self, bring_up: asyncio.Future[SessionHandle]) -> None:
        """Close a session whose creator was cancelled while it was being brought up."""
        if bring_up.cancelled() or bring_up.exception() is not None:
            return
        handle = bring_up.result()
        task = asyncio.ensure_future(self._close_handles([handle]))
        self._orphans.add(task)
        task.add_done_callback(self._orphans.discard)

    async def delete(self, session_id: str) -> bool:
        """Destroy the session; ``False`` if there was none."""
        rec = self._sessions.pop(session_id, None)
        if rec is None:
            return False
        await self._close_records([rec])
        return True

    async def delete_many(self, session_ids: Iterable[str]) -> list[str]:
        """Destroy the sessions that exist (together); the ids of those deleted."""
        recs = [rec for sid in dict.fromkeys(session_ids) if (rec := self._sessions.pop(sid, None))]
        await self._close_records(recs)
        return [rec.session_id for rec in recs]

    async def discard(self, session_id: str) -> None:
        """Forget a session whose sandbox died, closing what is left of it."""
        await self.delete(session_id)

    # -- use ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def using(self, session_id: str) -> AsyncIterator[SessionRecord]:
        """Mark the session busy for one exec (waits out a fork in progress)."""
        rec = self.get(session_id)
        while rec.forking is not None:
            await rec.forking.wait()
            rec = self.get(session_id)
        rec.active += 1
        rec.exec_count += 1
        rec.last_used = time.monotonic()
        try:
            yield rec
        finally:
            rec.active -= 1
            rec.last_used = time.monotonic()

    async def fork(self, session_id: str, count: int) -> tuple[list[SessionRecord], float]:
        """Fork ``count`` children off a quiescent session; all or nothing."""
        parent = self.get(session_id)
        if parent.active or parent.forking is not None:
            raise NodeError("session_busy", f"session {session_id!r} is busy; fork it when idle")
        self._reserve(count)
        parent.forking = asyncio.Event()
        start = time.perf_counter()
        try:
            ids = [new_session_id() for _ in range(count)]
            try:
                handles = await parent.handle.fork(ids)
            except SessionBusy as exc:
                raise NodeError("session_busy", f"session {session_id!r} is busy") from exc
            except SessionLost as exc:
                await self.discard(session_id)
                raise NodeError("session_gone", f"session {session_id!r} is gone") from exc
            except RuntimeError_ as exc:
                raise NodeError("session_bringup_failed", f"fork failed: {one_line(exc)}") from exc
            except ValueError as exc:  # e.g. a session running a service
                raise NodeError("bad_request", one_line(exc)) from exc
            children = [SessionRecord(h.session_id, parent.template_id, h) for h in handles]
            # a fork keeps its parent's policy (each child has its own gate and counters)
            await self._open_gates(children, parent.egress.policy if parent.egress else None)
            for child in children:
                self._sessions[child.session_id] = child
        finally:
            self._reserved -= count
            parent.forking.set()
            parent.forking = None
            parent.last_used = time.monotonic()
        return children, _ms_since(start)

    # -- background ------------------------------------------------------

    def reap_idle(self, now: float | None = None) -> list[SessionRecord]:
        """Remove and return the sessions idle longer than the TTL."""
        if self.ttl_seconds is None:
            return []
        now = time.monotonic() if now is None else now
        stale = [
            rec
            for rec in self._sessions.values()
            if not rec.active and rec.forking is None and now - _last_use(rec) > self.ttl_seconds
        ]
        for rec in stale:
            del self._sessions[rec.session_id]
        return stale

    async def _reap_forever(self, ttl_seconds: float) -> None:
        interval = max(0.05, min(ttl_seconds / 4.0, 5.0))
        while True:
            await asyncio.sleep(interval)
            stale = self.reap_idle()
            if stale:
                logger.info("reaping %d idle session(s)", len(stale))
                await self._close_records(stale)

    def _schedule_refill(self, template_id: str) -> None:
        if self._closed or self.pool_size == 0 or self._serves(template_id):
            return
        task = self._refills.get(template_id)
        if task is None or task.done():
            self._refills[template_id] = asyncio.create_task(
                self._refill(template_id), name=f"pool-refill-{template_id}"
            )

    def _serves(self, template_id: str) -> bool:
        """A template whose sessions run a service: never pooled (a pooled server
        would hold memory and CPU for nobody, and could die unseen before use)."""
        spec_of = getattr(self.runtime, "template_spec", None)
        try:
            return spec_of is not None and spec_of(template_id).service is not None
        except (KeyError, AttributeError):
            return False

    async def _refill(self, template_id: str) -> None:
        pool = self._pool.setdefault(template_id, deque())
        while not self._closed and len(pool) < self.pool_size:
            try:
                handle = await self.runtime.create_session(template_id, new_session_id())
            except Exception as exc:  # a failed warm-up must not kill the node
                logger.warning("warm pool for %r not refilled: %s", template_id, one_line(exc))
                return
            if self._closed:
                await self._close_handles([handle])
                return
            pool.append(handle)

    async def _open_gates(self, records: list[SessionRecord], policy: EgressPolicy | None) -> None:
        """Open each networked record's egress gate; on failure close the records' sessions."""
        try:
            for rec in records:
                path = getattr(rec.handle, "egress_socket", None)
                if path is None:
                    continue
                gate = EgressGate(
                    path,
                    policy or EgressPolicy(mode="none"),  # fail closed
                    self.egress_settings,
                    owner=getattr(self.runtime, "sandbox_uid", None),
                    on_decision=self.on_egress,
                )
                await gate.start()
                rec.egress = gate
        except OSError as exc:
            await self._close_records(records)
            raise NodeError(
                "session_bringup_failed", f"could not open the egress proxy: {one_line(exc)}"
            ) from exc

    async def _close_records(self, records: Iterable[SessionRecord]) -> None:
        records = list(records)
        gates = [rec.egress for rec in records if rec.egress is not None]
        await asyncio.gather(*(gate.close() for gate in gates), return_exceptions=True)
        await self._close_handles(rec.handle for rec in records)

    async def _close_handles(self, handles: Iterable[SessionHandle]) -> None:
        handles = list(handles)
        if not handles:
            return
        close_many = getattr(self.runtime, "close_sessions", None)  # one call for all
        closers: list[Awaitable[None]] = (
            [close_many(handles)] if close_many is not None else [h.close() for h in handles]
        )
        results = await asyncio.gather(*closers, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                logger.warning("session close failed: %s", one_line(result))
