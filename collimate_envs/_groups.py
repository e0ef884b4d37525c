"""The sandboxes of GRPO groups: one pristine parent session, K copy-on-write forks per group."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from collimate_rl.errors import (
    CollimateError,
    CollimateNotFoundError,
    CollimateSessionGoneError,
)
from collimate_rl.sandbox import Sandbox
from collimate_rl.wire._extensions import forget_batch_route, has_batch_route, is_missing_route

__all__ = ["GroupSessions", "MemberForker", "SessionLedger", "spread_targets"]

#: Parallel deletes of the sessions an episode leaves behind.
_DELETE_WORKERS = 8
#: Members forked ahead but idle longer than this are replaced (a node reaps idle
#: sessions, 600 s by default; an episode can wait that long for its completions).
SPARE_MAX_AGE_SECONDS = 120.0


@dataclass
class SessionLedger:
    """Every session an env created and has not deleted yet (thread-safe).

    A ``weakref.finalize`` on the owning env calls :meth:`reap_all`, so an env
    that is garbage-collected without ``close()`` still leaks nothing: it
    first waits for background work (``settle``), and a session recorded
    after it anyway is deleted at once.
    """

    client: Any
    live: set[str] = field(default_factory=set)
    reaped: bool = False
    settle: list[Callable[[], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def created(self, *session_ids: str) -> None:
        with self._lock:
            late = self.reaped
            self.live.update(session_ids)
        if late:
            self.delete(*session_ids)

    def delete(self, *session_ids: str) -> None:
        """Delete the sessions (concurrently when there are several); never raises."""
        with self._lock:
            doomed = [sid for sid in session_ids if sid in self.live]
            self.live.difference_update(doomed)
        if len(doomed) <= 1:
            for sid in doomed:
                self.client.delete_session(sid)  # never raises, per the contract
            return
        doomed = _delete_together(self.client, doomed)
        if not doomed:
            return
        try:
            with ThreadPoolExecutor(min(_DELETE_WORKERS, len(doomed))) as pool:
                list(pool.map(self.client.delete_session, doomed))
        except RuntimeError:  # no new threads (interpreter shutdown): one by one
            for sid in doomed:
                self.client.delete_session(sid)

    def reap_all(self) -> None:
        for wait in self.settle:
            wait()
        with self._lock:
            self.reaped = True
            doomed = sorted(self.live)
        self.delete(*doomed)

    def attach_to(self, owner: object) -> weakref.finalize[[SessionLedger], object]:
        return weakref.finalize(owner, SessionLedger.reap_all, self)


@dataclass
class GroupSessions:
    """One group's ``size`` members: forks of the env's pristine parent, for one episode."""

    members: list[str]


#: Where a parent lives: a node of a fleet client (``spread_targets()``), or ``None``.
Target = str | None


def spread_targets(client: Any) -> tuple[Target, ...]:
    """The nodes a client spreads new work over (its ``spread_targets()``), else ``(None,)``.

    A client over several nodes (``collimate_rl.ray.FleetClient``) names them, so the env
    forks each group on one node and spreads the groups; any other client is one target.

    >>> spread_targets(object())
    (None,)
    """
    offered = getattr(client, "spread_targets", None)
    targets = tuple(offered()) if callable(offered) else ()
    return targets or (None,)


@dataclass
class MemberForker:
    """Fresh members for every episode, forked ahead of time from pristine parents.

    A parent is created from the template once (lazily) and never runs
    anything, so a fork of it is a fresh session without the create, and a
    member does not depend on the task it will get. So after handing out an
    episode's members the forker already forks the next episode's in the
    background (same shape), and retires old members in the background too:
    a reset mostly takes sessions that are ready. A parent the node reaped
    in the meantime (idle TTL) is replaced once; a background fork that
    failed is simply redone on demand.

    Over a client that spreads work over several nodes (:func:`spread_targets`),
    there is one parent per node and group ``g`` is forked on node ``g % nodes``:
    a group's members share a node, the groups spread over all of them. When the
    nodes change (one joined or was lost), the next :meth:`open` forks anew.
    """

    ledger: SessionLedger
    template: str
    parents: dict[Target, str] = field(default_factory=dict)
    _spare: tuple[tuple[Any, ...], Future[tuple[float, list[str]]]] | None = None
    _background: ThreadPoolExecutor | None = None

    def __post_init__(self) -> None:
        self.ledger.settle.append(self._drain)

    @property
    def parent(self) -> str | None:
        """The parent session of a single-node client (the first parent otherwise)."""
        return next(iter(self.parents.values()), None)

    def open(self, groups: int, size: int) -> list[GroupSessions]:
        """``groups`` groups of ``size`` fresh members (all or nothing)."""
        targets = spread_targets(self.ledger.client)[:groups]
        shape = (targets, groups, size)
        members = self._take_spare(shape)
        if members is None:
            self._retire_parents(keep=targets)
            members = self._fork(targets, groups, size)
        self._spare = (shape, self._worker().submit(self._fork_ahead, targets, groups, size))
        return [GroupSessions(members[g * size : (g + 1) * size]) for g in range(groups)]

    def invalidate(self) -> None:
        """Forget the members forked ahead and the parents (after an infrastructure failure).

        They may have died with their node; the next :meth:`open` forks fresh members from
        new parents. The old sessions are deleted in the background (a no-op if gone).
        """
        spare, self._spare = self._spare, None
        if spare is not None:
            spare[1].add_done_callback(self._retire_forked)
        self._retire_parents(keep=())

    def _retire_parents(self, keep: tuple[Target, ...]) -> None:
        gone = [t for t in self.parents if t not in keep]
        self.retire(*(self.parents.pop(t) for t in gone))

    def _retire_forked(self, forked: Future[tuple[float, list[str]]]) -> None:
        if forked.exception() is None:
            self.retire(*forked.result()[1])

    def retire(self, *session_ids: str) -> None:
        """Delete sessions in the background (in order with the background forks)."""
        if session_ids:
            self._worker().submit(self.ledger.delete, *session_ids)

    def close(self) -> None:
        """Wait for the background work, then delete the spare members and the parents."""
        self._drain()
        spare, self._spare = self._spare, None
        if spare is not None and spare[1].exception() is None:
            self.ledger.delete(*spare[1].result()[1])
        parents, self.parents = list(self.parents.values()), {}
        self.ledger.delete(*parents)

    def _drain(self) -> None:
        background, self._background = self._background, None
        if background is not None:
            with contextlib.suppress(RuntimeError):  # called from its own thread (by GC)
                background.shutdown(wait=True)

    def _worker(self) -> ThreadPoolExecutor:
        if self._background is None:
            self._background = ThreadPoolExecutor(1, thread_name_prefix="collimate-members")
        return self._background

    def _take_spare(self, shape: tuple[Any, ...]) -> list[str] | None:
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        spare_shape, future = spare
        if future.exception() is not None:
            return None
        forked_at, members = future.result()
        if spare_shape != shape or time.monotonic() - forked_at > SPARE_MAX_AGE_SECONDS:
            self.retire(*members)  # another width (a partial reset), other nodes, or stale
            return None
        return members

    def _fork_ahead(
        self, targets: tuple[Target, ...], groups: int, size: int
    ) -> tuple[float, list[str]]:
        members = self._fork(targets, groups, size)
        return time.monotonic(), members

    def _fork(self, targets: tuple[Target, ...], groups: int, size: int) -> list[str]:
        """Members of ``groups`` groups, in group order; group ``g`` on ``targets[g % n]``."""
        counts = {t: size * len(range(i, groups, len(targets))) for i, t in enumerate(targets)}
        if len(targets) == 1:
            forked = {targets[0]: self._fork_on(targets[0], counts[targets[0]])}
        else:
            with ThreadPoolExecutor(len(targets), thread_name_prefix="collimate-fork") as pool:
                futures = {t: pool.submit(self._fork_on, t, n) for t, n in counts.items()}
            forked = {t: f.result() for t, f in futures.items() if f.exception() is None}
            failure = next((f.exception() for f in futures.values() if f.exception()), None)
            if failure is not None:  # all or nothing: the other nodes' forks go too
                self.ledger.delete(*(m for group in forked.values() for m in group))
                raise failure
        members: list[str] = []
        taken = dict.fromkeys(targets, 0)
        for g in range(groups):
            target = targets[g % len(targets)]
            members += forked[target][taken[target] : taken[target] + size]
            taken[target] += size
        return members

    def _fork_on(self, target: Target, count: int) -> list[str]:
        try:
            members = _fork(self.ledger.client, self._parent(target), count)
        except (CollimateNotFoundError, CollimateSessionGoneError):
            self._replace_parent(target)
            members = _fork(self.ledger.client, self._parent(target), count)
        self.ledger.created(*members)
        return members

    def _parent(self, target: Target) -> str:
        parent = self.parents.get(target)
        if parent is None:
            client = self.ledger.client
            if target is None:
                created = client.create_session(self.template)
            else:
                created = client.create_session(self.template, node=target)
            parent = self.parents[target] = str(created["session_id"])
            self.ledger.created(parent)
        return parent

    def _replace_parent(self, target: Target) -> None:
        parent = self.parents.pop(target, None)
        if parent is not None:
            self.ledger.delete(parent)


def _delete_together(client: Any, session_ids: list[str]) -> list[str]:
    """Delete in one request where the node has the batch route; the ids left to delete.

    On a real daemon or a gateway (no such route), or if the request fails,
    every id is left for the per-session ``DELETE`` (which never raises).
    """
    delete_many = getattr(client, "delete_sessions", None)
    if not callable(delete_many) or not has_batch_route(client):
        return session_ids
    try:
        delete_many(session_ids)  # ids it calls missing are gone already (reaped, lost)
    except CollimateError as exc:
        if is_missing_route(exc):
            forget_batch_route(client)
        return session_ids
    return []


def _fork(client: Any, parent: str, size: int) -> list[str]:
    # The SDK's strict-width fork: the node's extension or the gateway's fork,
    # chunked, and every child reaped if any part fails.
    children = Sandbox.adopt(client, parent).fork(size)
    return [str(child.session_id) for child in children]
