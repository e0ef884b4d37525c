"""The sandboxes of GRPO groups: one pristine parent session, K copy-on-write forks per group."""

from __future__ import annotations

import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from collimate_rl.errors import CollimateNotFoundError, CollimateSessionGoneError
from collimate_rl.sandbox import Sandbox

__all__ = ["GroupSessions", "MemberForker", "SessionLedger"]

#: Parallel deletes of the sessions an episode leaves behind.
_DELETE_WORKERS = 8


@dataclass
class SessionLedger:
    """Every session an env created and has not deleted yet.

    A ``weakref.finalize`` on the owning env calls :meth:`reap_all`, so an env
    that is garbage-collected without ``close()`` still leaks nothing.
    """

    client: Any
    live: set[str] = field(default_factory=set)

    def created(self, *session_ids: str) -> None:
        self.live.update(session_ids)

    def delete(self, *session_ids: str) -> None:
        """Delete the sessions (concurrently when there are several); never raises."""
        doomed = [sid for sid in session_ids if sid in self.live]
        self.live.difference_update(doomed)
        if len(doomed) <= 1:
            for sid in doomed:
                self.client.delete_session(sid)  # never raises, per the contract
            return
        try:
            with ThreadPoolExecutor(min(_DELETE_WORKERS, len(doomed))) as pool:
                list(pool.map(self.client.delete_session, doomed))
        except RuntimeError:  # no new threads (interpreter shutdown): one by one
            for sid in doomed:
                self.client.delete_session(sid)

    def reap_all(self) -> None:
        self.delete(*sorted(self.live))

    def attach_to(self, owner: object) -> weakref.finalize[[SessionLedger], object]:
        return weakref.finalize(owner, SessionLedger.reap_all, self)


@dataclass
class GroupSessions:
    """One group's ``size`` members: forks of the env's pristine parent, for one episode."""

    members: list[str]

    def close(self, ledger: SessionLedger) -> None:
        ledger.delete(*self.members)


@dataclass
class MemberForker:
    """Forks every episode's members from one parent session that never runs anything.

    The parent is created from the template once (lazily) and stays pristine,
    so a fork of it is a fresh session without the create: one fork call
    gives every group being reset its members. A parent the node reaped in
    the meantime (idle TTL) is replaced once.
    """

    ledger: SessionLedger
    template: str
    parent: str | None = None

    def open(self, groups: int, size: int) -> list[GroupSessions]:
        """``groups`` groups of ``size`` fresh members (all or nothing)."""
        try:
            members = _fork(self.ledger.client, self._parent(), groups * size)
        except (CollimateNotFoundError, CollimateSessionGoneError):
            self._drop_parent()
            members = _fork(self.ledger.client, self._parent(), groups * size)
        self.ledger.created(*members)
        return [GroupSessions(members[g * size : (g + 1) * size]) for g in range(groups)]

    def close(self) -> None:
        self._drop_parent()

    def _parent(self) -> str:
        if self.parent is None:
            created = self.ledger.client.create_session(self.template)
            self.parent = str(created["session_id"])
            self.ledger.created(self.parent)
        return self.parent

    def _drop_parent(self) -> None:
        parent, self.parent = self.parent, None
        if parent is not None:
            self.ledger.delete(parent)


def _fork(client: Any, parent: str, size: int) -> list[str]:
    # The SDK's strict-width fork: the node's extension or the gateway's fork,
    # chunked, and every child reaped if any part fails.
    children = Sandbox.adopt(client, parent).fork(size)
    return [str(child.session_id) for child in children]
