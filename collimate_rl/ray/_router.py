"""Placement and routing, shared by the sync and async fleet clients (no I/O here).

* A call about a session goes to the node named in its id (:mod:`._ids`): forks, execs,
  file operations and deletes never leave the session's node, so a fork group never spans
  nodes.
* A new session goes to the healthy node with the fewest sessions per exec slot, counting
  the sessions this client placed since the node's last load report (so a burst of creates
  spreads before the next report); a one-shot exec to the node with the fewest execs
  running or queued per slot, counting this client's own in flight.
* A node that is lost fails its calls with :class:`~collimate_rl.ray.NodeLostError`,
  including a call in flight whose answer arrives after the loss was noticed.

>>> from collimate_rl.ray._directory import FleetNode, NodeLoad, NodeState
>>> d = Directory.fixed([
...     FleetNode("n00000001", "r1", "http://a:1", NodeState.HEALTHY, NodeLoad(sessions=9, max_inflight=8)),
...     FleetNode("n00000002", "r2", "http://b:1", NodeState.HEALTHY, NodeLoad(sessions=1, max_inflight=8)),
... ])
>>> router = Router(d)
>>> router.choose("session").tag
'n00000002'
>>> node, node_sid = router.locate("n00000001.ses_abc")
>>> node.address, node_sid
('http://a:1', 'ses_abc')
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.ray._directory import Directory, FleetNode, NodeState
from collimate_rl.ray._errors import NodeLostError, NoHealthyNodeError
from collimate_rl.ray._ids import fleet_id, split_id
from collimate_rl.wire.models import (
    CreateSessionResponse,
    DeleteResponse,
    ForkResponse,
    Health,
    SessionInfo,
)

__all__ = [
    "Placement",
    "Router",
    "fleet_created",
    "fleet_deleted",
    "fleet_forked",
    "fleet_health",
    "fleet_session",
    "lost_error",
    "no_healthy_node",
]

Placement = Literal["session", "exec"]


class Router:
    """Which node a call goes to, and what a node's failure means for the caller.

    One per client (its in-flight counts are that client's own); thread-safe.
    """

    def __init__(self, directory: Directory) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._inflight: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()  # calls sent, by node tag
        self._placed: dict[str, tuple[int, int]] = {}  # tag -> (load stamp, sessions placed)
        self._turn = itertools.count()

    # -- where calls go -------------------------------------------------------------

    def locate(self, session_id: object) -> tuple[FleetNode, str]:
        """The node holding ``session_id`` and the node's own id for it.

        Raises:
            CollimateUsageError: not a fleet id.
            CollimateNotFoundError: a node this fleet never had (404 ``no_such_session``).
            NodeLostError: the node is gone (nothing was sent).
        """
        self._check_open()
        node = self.directory.node_of(session_id)
        _, node_sid = split_id(session_id)
        if not node.state.serves_sessions:
            raise lost_error(node, sent=False)
        return node, node_sid

    def choose(self, kind: Placement, exclude: Collection[str] = ()) -> FleetNode:
        """The least-loaded healthy node for a new session or a one-shot exec.

        Raises:
            NoHealthyNodeError: no healthy node (outside ``exclude``).
        """
        self._check_open()
        nodes = [n for n in self.directory.placeable() if n.tag not in exclude]
        if not nodes:
            raise no_healthy_node(self.directory.nodes(), exclude)
        start = next(self._turn) % len(nodes)
        rotated = nodes[start:] + nodes[:start]  # equal loads take turns
        with self._lock:
            return min(rotated, key=lambda n: self._score(n, kind))

    def pinned(self, tag: str) -> FleetNode:
        """Node ``tag`` for new work asked for there explicitly (``create_session(node=...)``).

        Raises:
            CollimateUsageError: not a node of this fleet.
            NodeLostError / NoHealthyNodeError: it cannot take new work now.
        """
        self._check_open()
        node = self.directory.get(tag)
        if node is None:
            raise CollimateUsageError(f"node {tag!r} is not part of this fleet")
        if node.state is NodeState.HEALTHY:
            return node
        if node.state.serves_sessions:
            raise NoHealthyNodeError(
                f"fleet node {tag} is {node.state.value}: it takes no new work"
            )
        raise lost_error(node, sent=False)

    def _placed_since_report(self, node: FleetNode) -> int:
        """Sessions this client placed on ``node`` since its last load report."""
        stamp, placed = self._placed.get(node.tag, (node.load.stamp, 0))
        return placed if stamp == node.load.stamp else 0

    def _score(self, node: FleetNode, kind: Placement) -> float:
        slots = max(1, node.load.max_inflight)
        if kind == "session":
            return (node.load.sessions + self._placed_since_report(node)) / slots
        mine = self._inflight[node.tag]
        return max(mine, node.load.running + node.load.queued) / slots

    def spread_targets(self) -> tuple[str, ...]:
        """The tags of the nodes new work may go to now."""
        return tuple(n.tag for n in self.directory.placeable())

    # -- bookkeeping around a call ----------------------------------------------------

    def started(self, node: FleetNode, kind: Placement | None) -> None:
        """A call to ``node`` is about to be sent (``kind``: what it places, if anything)."""
        with self._lock:
            self._inflight[node.tag] += 1
            self.calls[node.tag] += 1
            if kind == "session":
                self._placed[node.tag] = (node.load.stamp, self._placed_since_report(node) + 1)

    def finished(self, node: FleetNode) -> None:
        """The call to ``node`` returned or failed."""
        with self._lock:
            self._inflight[node.tag] -= 1
            if self._inflight[node.tag] <= 0:
                del self._inflight[node.tag]

    def confirm(self, node: FleetNode) -> None:
        """After an answer: raise :class:`NodeLostError` if the node was lost meanwhile."""
        now = self.directory.get(node.tag)
        if now is not None and not now.state.serves_sessions:
            raise lost_error(now, sent=True)

    def failure(self, node: FleetNode, exc: CollimateError) -> CollimateError:
        """The error to raise for ``exc`` from ``node``: :class:`NodeLostError` if it is gone."""
        if isinstance(exc, NodeLostError):
            return exc
        now = self.directory.check(node.tag)
        if now is not None and not now.state.serves_sessions:
            lost = lost_error(now, sent=True)
            lost.__cause__ = exc
            return lost
        return exc

    def before_retry(self, tag: str) -> None:
        """Called before the wire layer sleeps to retry on node ``tag`` (nothing ran).

        A retry on a lost node would spin until the retry budget runs out: stop now.
        """
        now = self.directory.check(tag)
        if now is not None and not now.state.serves_sessions:
            raise lost_error(now, sent=False)

    def _check_open(self) -> None:
        if self.directory.closed:
            raise CollimateUsageError("this fleet client's RayFleet was closed")


def lost_error(node: FleetNode, *, sent: bool) -> NodeLostError:
    """The :class:`NodeLostError` for ``node`` (its recorded reason)."""
    if node.state is NodeState.STOPPED:
        reason = "the fleet stopped it"
    else:
        reason = node.error or f"it is {node.state.value}"
    return NodeLostError(node.tag, node.ray_node_id, reason, sent=sent)


def no_healthy_node(
    nodes: Iterable[FleetNode], exclude: Collection[str] = ()
) -> NoHealthyNodeError:
    """The error for "nowhere to place new work", naming every node's state.

    >>> print(no_healthy_node([FleetNode("n00000001", "r1", state=NodeState.LOST, error="gone")]))
    no healthy node in the fleet to take new work (n00000001: lost (gone)); wait for nodes to join or start a new fleet
    """
    parts = []
    for node in nodes:
        state = "refused this call" if node.tag in exclude else node.state.value
        parts.append(f"{node.tag}: {state}" + (f" ({node.error})" if node.error else ""))
    listing = "; ".join(parts) or "it has no nodes"
    return NoHealthyNodeError(
        f"no healthy node in the fleet to take new work ({listing}); "
        "wait for nodes to join or start a new fleet"
    )


# -- rewriting node answers into fleet answers ------------------------------------------


def fleet_created(tag: str, resp: CreateSessionResponse) -> CreateSessionResponse:
    """A node's create answer with the fleet id."""
    raw = dict(resp.raw)
    raw["session_id"] = fleet_id(tag, str(resp.session_id or ""))
    if "id" in raw:
        raw["id"] = raw["session_id"]
    return CreateSessionResponse.from_raw(raw)


def fleet_forked(tag: str, resp: ForkResponse) -> ForkResponse:
    """A node's fork answer with fleet ids for the parent and every child."""
    rows = []
    for child in resp.children:
        row = dict(child.raw)
        row["session_id"] = row["id"] = fleet_id(tag, child.session_id)
        rows.append(row)
    return ForkResponse.build(fleet_id(tag, resp.parent), rows)


def fleet_session(tag: str, info: SessionInfo) -> SessionInfo:
    """A node's session row with the fleet id."""
    raw = dict(info.raw)
    raw["session_id"] = fleet_id(tag, info.session_id)
    if "id" in raw:
        raw["id"] = raw["session_id"]
    return SessionInfo.from_raw(raw)


def fleet_deleted(session_id: str, resp: DeleteResponse) -> DeleteResponse:
    """A node's delete answer naming the fleet id."""
    return DeleteResponse.from_raw({**resp.raw, "session_id": session_id})


def fleet_health(healths: Mapping[str, Health], nodes: Iterable[FleetNode]) -> Health:
    """One health object for the fleet: sums over the nodes that answered.

    ``status`` is ``ok`` when some node takes new work, else ``draining``;
    ``templates`` are those every answering node serves; ``nodes`` lists each node.

    >>> h = fleet_health({"n00000001": Health.from_raw({"status": "ok", "sessions": 2,
    ...     "max_inflight": 8, "templates": ["python3"]})},
    ...     [FleetNode("n00000001", "r1", state=NodeState.HEALTHY)])
    >>> h.status, h.sessions, h.max_inflight, h.templates, h["nodes"][0]["state"]
    ('ok', 2, 8, ('python3',), 'healthy')
    """
    listed = list(nodes)
    template_sets = [set(h.templates) for h in healths.values()]
    common = set.intersection(*template_sets) if template_sets else set()
    first = next(iter(healths.values()), None)
    raw: dict[str, Any] = {
        "status": "ok" if any(n.state is NodeState.HEALTHY for n in listed) else "draining",
        "sessions": sum(h.sessions for h in healths.values()),
        "running": sum(h.running for h in healths.values()),
        "queued": sum(h.queued for h in healths.values()),
        "max_inflight": sum(h.max_inflight for h in healths.values()),
        "templates": sorted(common),
        "version": first.version if first is not None else "",
        "nodes": [n.to_json() for n in listed],
    }
    return Health.from_raw(raw)
