"""The fleet's nodes as its clients see them: one entry per node, never one per session.

The fleet (:class:`~collimate_rl.ray.RayFleet`) writes the entries as nodes start,
report load, drain or die; routing clients read them. A client that meets a
transport error asks the directory to :meth:`~Directory.check` that node now
rather than waiting for the fleet's next poll.

>>> d = Directory()
>>> d.put(FleetNode("n0a1b2c3d", "ray-1", "http://10.0.0.5:8790", NodeState.HEALTHY))
>>> [n.tag for n in d.placeable()]
['n0a1b2c3d']
>>> d.update("n0a1b2c3d", state=NodeState.LOST, error="its Ray node died").state
<NodeState.LOST: 'lost'>
>>> d.placeable()
[]
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collimate_rl.ray._errors import unknown_node
from collimate_rl.ray._ids import split_id

__all__ = ["Directory", "FleetNode", "NodeLoad", "NodeState"]

#: How often one node may be checked on a client's behalf (a burst of errors checks once).
CHECK_INTERVAL_SECONDS = 0.25


class NodeState(str, enum.Enum):
    """Where a fleet node is in its life."""

    STARTING = "starting"  #: its actor and LocalNode are starting; no work yet
    HEALTHY = "healthy"  #: takes new sessions and one-shot execs
    DRAINING = "draining"  #: its Ray node is draining: no new work, its sessions still work
    LOST = "lost"  #: gone (Ray node dead, actor dead, node unreachable): its sessions fail
    FAILED = "failed"  #: never came up (``error`` says why)
    STOPPED = "stopped"  #: stopped by the fleet's ``close()``

    @property
    def serves_sessions(self) -> bool:
        """Calls for this node's sessions are sent (healthy or draining).

        >>> NodeState.DRAINING.serves_sessions, NodeState.LOST.serves_sessions
        (True, False)
        """
        return self in (NodeState.HEALTHY, NodeState.DRAINING)

    @property
    def ended(self) -> bool:
        """This node run is over (lost, failed or stopped): nothing brings it back.

        >>> NodeState.STOPPED.ended, NodeState.STARTING.ended
        (True, False)
        """
        return self in (NodeState.LOST, NodeState.FAILED, NodeState.STOPPED)


@dataclass(frozen=True)
class NodeLoad:
    """A node's load as its last ``/v1/health`` reported it.

    >>> NodeLoad(sessions=10, running=3, queued=1, max_inflight=8).busy
    0.5
    """

    sessions: int = 0
    running: int = 0
    queued: int = 0
    max_inflight: int = 1
    #: bumped on every report, so a client can tell a fresh report from an old one
    stamp: int = 0

    @property
    def busy(self) -> float:
        """Execs running or queued per exec slot."""
        return (self.running + self.queued) / max(1, self.max_inflight)

    @classmethod
    def from_health(cls, health: Mapping[str, Any], stamp: int) -> NodeLoad:
        """From a node's health object."""

        def number(key: str, default: int) -> int:
            try:
                return int(health.get(key, default))
            except (TypeError, ValueError):
                return default

        return cls(
            sessions=number("sessions", 0),
            running=number("running", 0),
            queued=number("queued", 0),
            max_inflight=max(1, number("max_inflight", 1)),
            stamp=stamp,
        )


@dataclass(frozen=True)
class FleetNode:
    """One node of a fleet: a LocalNode pinned to one Ray node.

    Attributes:
        tag: this run's tag, the prefix of its session ids.
        ray_node_id: the Ray node it runs on.
        address: the node's URL (``http://<node ip>:<port>``); empty until it started.
        state: see :class:`NodeState`.
        load: the last load it reported.
        error: why it failed or was lost (empty otherwise).
        templates: the templates it serves.
        pid: the LocalNode's process id on its machine (0 until it started).
        auth: the node requires a bearer token (its own; the fleet's clients send it).
    """

    tag: str
    ray_node_id: str
    address: str = ""
    state: NodeState = NodeState.STARTING
    load: NodeLoad = field(default_factory=NodeLoad)
    error: str = ""
    templates: tuple[str, ...] = ()
    pid: int = 0
    auth: bool = False

    def to_json(self) -> dict[str, Any]:
        """Plain data (for logs and ``collimate`` tools).

        >>> FleetNode("n0a1b2c3d", "ray-1").to_json()["state"]
        'starting'
        """
        data = dataclasses.asdict(self)
        data["state"] = self.state.value
        return data


class Directory:
    """The fleet's node entries (thread-safe), keyed by tag.

    Args:
        checker: called as ``checker(tag)`` by :meth:`check` to re-examine a node now
            (the fleet probes it and updates its entry); ``None`` for a fixed table.
    """

    def __init__(self, checker: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, FleetNode] = {}
        self._checked: dict[str, float] = {}
        self._checker = checker
        self._bakes: list[dict[str, Any]] = []
        self._tokens: dict[str, str] = {}  # kept out of FleetNode: entries get logged
        self.closed = False

    def put(self, node: FleetNode) -> None:
        """Add or replace a node's entry."""
        with self._lock:
            self._nodes[node.tag] = node

    def update(self, tag: str, **changes: Any) -> FleetNode:
        """Change fields of a node's entry; returns the new entry.

        A lost, failed or stopped node stays so: nothing brings a node run back.
        """
        with self._lock:
            node = self._nodes[tag]
            if node.state.ended and changes.get("state", node.state) != node.state:
                return node
            if node.state.ended:
                changes.pop("error", None)  # keep the reason it ended with
            node = dataclasses.replace(node, **changes)
            self._nodes[tag] = node
            return node

    def get(self, tag: str) -> FleetNode | None:
        """The entry of node ``tag``, if the fleet ever had it."""
        with self._lock:
            return self._nodes.get(tag)

    def nodes(self) -> list[FleetNode]:
        """Every entry, oldest first."""
        with self._lock:
            return list(self._nodes.values())

    def placeable(self) -> list[FleetNode]:
        """The nodes new work may go to (healthy ones)."""
        return [n for n in self.nodes() if n.state is NodeState.HEALTHY]

    def node_of(self, session_id: object) -> FleetNode:
        """The entry of the node that holds ``session_id`` (whatever its state).

        Raises:
            CollimateUsageError: not a fleet session id.
            CollimateNotFoundError: a node this fleet never had (404 ``no_such_session``).
        """
        tag, _ = split_id(session_id)
        node = self.get(tag)
        if node is None:
            raise unknown_node(session_id, tag)
        return node

    def capacity(self) -> int:
        """Execs the healthy nodes run at once (the sum of their ``max_inflight``)."""
        return sum(n.load.max_inflight for n in self.placeable())

    def check(self, tag: str) -> FleetNode | None:
        """Re-examine node ``tag`` now (at most every few hundred ms per node); its entry."""
        if self._checker is not None:
            now = time.monotonic()
            with self._lock:
                due = now - self._checked.get(tag, -1e9) >= CHECK_INTERVAL_SECONDS
                if due:
                    self._checked[tag] = now
            if due:
                self._checker(tag)
        return self.get(tag)

    def set_token(self, tag: str, token: str | None) -> None:
        """Remember node ``tag``'s bearer token (``None``: it needs none)."""
        with self._lock:
            if token is None:
                self._tokens.pop(tag, None)
            else:
                self._tokens[tag] = token

    def token_of(self, tag: str) -> str | None:
        """Node ``tag``'s bearer token, if it has one."""
        with self._lock:
            return self._tokens.get(tag)

    def record_bake(self, spec: Mapping[str, Any]) -> None:
        """Remember a template baked on the fleet (nodes that join later bake it too)."""
        with self._lock:
            self._bakes.append(dict(spec))

    def bakes(self) -> list[dict[str, Any]]:
        """The templates baked on the fleet, in order (``bake_template`` keyword arguments)."""
        with self._lock:
            return [dict(spec) for spec in self._bakes]

    @classmethod
    def fixed(cls, nodes: Iterable[FleetNode]) -> Directory:
        """A directory of a fixed set of nodes (no checks): for tests and tools.

        >>> Directory.fixed([FleetNode("n0a1b2c3d", "r")]).get("n0a1b2c3d").ray_node_id
        'r'
        """
        directory = cls()
        for node in nodes:
            directory.put(node)
        return directory
