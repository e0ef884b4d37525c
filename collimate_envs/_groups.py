"""The sandboxes of one GRPO group: a warm parent session and K copy-on-write forks."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from collimate_rl.sandbox import Sandbox

__all__ = ["GroupSessions", "SessionLedger"]


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
        for sid in session_ids:
            if sid in self.live:
                self.live.discard(sid)
                self.client.delete_session(sid)  # never raises, per the contract

    def reap_all(self) -> None:
        self.delete(*sorted(self.live))

    def attach_to(self, owner: object) -> weakref.finalize[[SessionLedger], object]:
        return weakref.finalize(owner, SessionLedger.reap_all, self)


@dataclass
class GroupSessions:
    """A parent session (task setup ran once) and its ``size`` forked members."""

    parent: str
    members: list[str]

    @classmethod
    def open(cls, ledger: SessionLedger, template: str, size: int) -> GroupSessions:
        """Create the parent from the template and fork it ``size`` ways (all or nothing)."""
        client = ledger.client
        created = client.create_session(template)
        parent = str(created["session_id"])
        ledger.created(parent)
        try:
            members = _fork(client, parent, size)
        except BaseException:
            ledger.delete(parent)
            raise
        ledger.created(*members)
        return cls(parent=parent, members=members)

    def close(self, ledger: SessionLedger) -> None:
        ledger.delete(*self.members, self.parent)


def _fork(client: Any, parent: str, size: int) -> list[str]:
    # The SDK's strict-width fork: the node's extension or the gateway's fork,
    # chunked, and every child reaped if any part fails.
    children = Sandbox.adopt(client, parent).fork(size)
    return [str(child.session_id) for child in children]
