"""``RayFleet``: one LocalNode per Ray node, kept in step with the cluster.

The fleet starts a :class:`~collimate_rl.ray._host.NodeHost` actor on every alive Ray
node (pinned with ``NodeAffinitySchedulingStrategy(soft=False)``); each starts a
LocalNode listening on its machine's address. A monitor thread then follows the
cluster every ``poll_interval`` seconds (and at once when a client meets an error):

* a Ray node that appears gets a node (it takes work once it is up and has replayed
  the fleet's baked templates);
* a Ray node that Ray reports draining takes no new work (its sessions keep working);
* a node whose Ray node died, whose LocalNode drains (its actor died) or that stops
  answering is *lost*: its sessions fail with :class:`~collimate_rl.ray.NodeLostError`,
  and its actor is killed so nothing of it keeps running.

``close()`` stops every node (drain, then remove its files) and kills the actors;
the actors are the driver's, so Ray kills them if the driver dies, and their nodes
follow (owner pipe).

>>> fleet = RayFleet(isolation="none", max_inflight=4)
>>> fleet.nodes()
[]
>>> fleet.client()
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: the RayFleet is not started; use it as a context manager (with RayFleet() as fleet: ...) or call start()
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from collimate_rl._bearer import bearer_headers, new_token
from collimate_rl.errors import CollimateUsageError
from collimate_rl.ray._async_client import AsyncFleetClient
from collimate_rl.ray._client import FleetClient
from collimate_rl.ray._directory import Directory, FleetNode, NodeLoad, NodeState
from collimate_rl.ray._errors import NoHealthyNodeError
from collimate_rl.ray._host import NODE_OPTIONS, NodeHost
from collimate_rl.ray._ids import new_tag
from collimate_rl.ray._observe import FleetStats, collect_stats, write_private, write_sd_file
from collimate_rl.ray._router import no_healthy_node
from collimate_rl.wire import CollimateClient

__all__ = ["RayFleet"]

log = logging.getLogger("collimate_rl.ray")

#: Consecutive unanswered health probes after which a node counts as lost.
MISSES_BEFORE_LOST = 3
#: The first wait before a Ray node whose fleet node failed to start gets another one.
RESTART_BACKOFF_SECONDS = 10.0
_PROBE_TIMEOUT = 3.0


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - the extra is part of `test`
        raise CollimateUsageError(
            "collimate_rl.ray needs Ray: pip install 'collimate-rl[ray]'"
        ) from exc
    return ray


_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    """``NodeHost`` as a Ray actor class (made on first use: importing needs no Ray)."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = _ray().remote(NodeHost)
    return _ACTOR_CLASS


@dataclass
class _Member:
    """The fleet's own record of one node run (the directory holds its public entry)."""

    tag: str
    ray_node_id: str
    actor: Any
    ready: Any  # the ObjectRef of the actor's first info() call
    started: float = field(default_factory=time.monotonic)
    misses: int = 0
    joining: bool = False  # replaying bakes in the background


class RayFleet:
    """A fleet of local sandbox nodes, one per Ray node, behind one client.

    Args:
        isolation: the nodes' sandbox (``auto``, ``bwrap``, ``none``: dev only).
        port: the TCP port every node listens on (default: a free one per node). Fix it
            where a firewall or a Kubernetes ``NetworkPolicy`` must name it.
        resource: only Ray nodes that offer this custom resource get a node (e.g. start
            your CPU workers with ``--resources '{"collimate": 1}'``); default: all.
        num_cpus: CPUs each node's actor reserves in Ray's accounting (default 0: a node
            runs beside training without taking its slots; its sandboxes still use CPU).
        poll_interval: seconds between checks of the cluster and the nodes' load.
        startup_timeout: seconds a node may take to start.
        metrics_sd_file: keep this file a Prometheus ``file_sd_configs`` list of the
            serving nodes, with their read-only metrics token in ``<file>.token``
            (see :mod:`collimate_rl.ray._observe`, docs/operations.md).
        **node_options: ``LocalNode`` arguments for every node: ``max_inflight``,
            ``queue``, ``max_sessions``, ``session_ttl``, ``pool_size``,
            ``drain_timeout``, ``share_site_packages``, ``extra_args``.
    """

    def __init__(
        self,
        *,
        isolation: str = "auto",
        port: int | None = None,
        resource: str | None = None,
        num_cpus: float = 0.0,
        poll_interval: float = 2.0,
        startup_timeout: float = 120.0,
        metrics_sd_file: str | os.PathLike[str] | None = None,
        **node_options: Any,
    ) -> None:
        unknown = set(node_options) - NODE_OPTIONS
        if unknown:
            raise CollimateUsageError(
                f"unknown node option(s) {', '.join(sorted(unknown))}; "
                f"choose from {', '.join(sorted(NODE_OPTIONS - {'startup_timeout'}))}"
            )
        if poll_interval <= 0 or startup_timeout <= 0:
            raise CollimateUsageError("poll_interval and startup_timeout must be > 0")
        self._options: dict[str, Any] = {"isolation": isolation, **node_options}
        self._options["startup_timeout"] = startup_timeout
        self._sd_file = Path(metrics_sd_file) if metrics_sd_file is not None else None
        self._sd_text: str | None = None
        if self._sd_file is not None:
            self._options["metrics_token"] = new_token()
        self._port = port
        self._resource = resource
        self._num_cpus = num_cpus
        self._poll_interval = poll_interval
        self._startup_timeout = startup_timeout
        self._directory = Directory(checker=self.check)
        self._members: dict[str, _Member] = {}
        self._backoff: dict[str, tuple[float, float]] = {}  # ray node -> (retry at, wait)
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._probe: httpx.Client | None = None
        self._joins: ThreadPoolExecutor | None = None
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._started = False
        self._closed = False

    # -- public surface ------------------------------------------------------------

    def start(self) -> RayFleet:
        """Start a node on every eligible alive Ray node and wait until they answer.

        Raises:
            CollimateUsageError: Ray is not installed or not initialized.
            NoHealthyNodeError: no eligible Ray node, or no node came up (with reasons).
        """
        if self._started:
            return self
        if self._closed:
            raise CollimateUsageError("this RayFleet was closed; make a new one")
        ray = _ray()
        if not ray.is_initialized():
            raise CollimateUsageError(
                "RayFleet needs Ray running in this process: call ray.init() (a local Ray) "
                "or ray.init(address='auto') (this machine's cluster) first"
            )
        if self._sd_file is not None:
            write_private(
                self._sd_file.with_name(self._sd_file.name + ".token"),
                self._options["metrics_token"],
            )
        self._probe = httpx.Client(timeout=_PROBE_TIMEOUT, trust_env=False)
        self._joins = ThreadPoolExecutor(4, thread_name_prefix="collimate-fleet-join")
        self._started = True
        atexit.register(self.close)
        try:
            self.refresh()
            if not self._members:
                which = f" with the resource {self._resource!r}" if self._resource else ""
                raise NoHealthyNodeError(f"no alive Ray node{which} to start a fleet node on")
            deadline = time.monotonic() + self._startup_timeout + 5.0
            while self._pending() and time.monotonic() < deadline:
                time.sleep(0.1)
                self.refresh()
            if not self._directory.placeable():
                raise no_healthy_node(self._directory.nodes())
        except BaseException:
            self.close()
            raise
        self._monitor = threading.Thread(
            target=self._follow, name="collimate-fleet-monitor", daemon=True
        )
        self._monitor.start()
        return self

    def nodes(self) -> list[FleetNode]:
        """Every node the fleet has had, oldest first: tag, Ray node, address, state, load."""
        return self._directory.nodes()

    def client(self, **kwargs: Any) -> FleetClient:
        """A blocking client over the fleet (``timeout``, ``retries``, ... as for
        ``CollimateClient``); closed with the fleet."""
        self._check_started()
        client = FleetClient(self._directory, **kwargs)
        self._clients.add(client)
        return client

    def async_client(self, **kwargs: Any) -> AsyncFleetClient:
        """An async client over the fleet (close it with ``aclose()``)."""
        self._check_started()
        return AsyncFleetClient(self._directory, **kwargs)

    def node_of(self, session_id: str) -> FleetNode:
        """The node that holds ``session_id`` (any state: a lost node's entry says why)."""
        return self._directory.node_of(session_id)

    def direct_client(self, tag: str, **kwargs: Any) -> CollimateClient:
        """A plain daemon client of node ``tag`` alone (node-local ids; the caller closes it).

        For tools and benchmarks: the fleet client is what work should use.
        """
        node = self._directory.get(tag)
        if node is None or not node.address:
            raise CollimateUsageError(f"node {tag!r} is not a started node of this fleet")
        return CollimateClient(node.address, token=self._directory.token_of(tag), **kwargs)

    def host_actor(self, tag: str) -> Any:
        """The Ray actor that runs node ``tag`` (its ``call`` method is the Ray-transport
        path the benchmark compares with HTTP)."""
        member = self._members.get(tag)
        if member is None:
            raise CollimateUsageError(f"node {tag!r} is not part of this fleet")
        return member.actor

    def stats(self, timeout: float = 5.0) -> FleetStats:
        """Every serving node's ``/metrics`` now, read at once, and the fleet's totals.

        A node that does not answer is a row with its ``error``, not an exception.
        """
        self._check_started()
        return collect_stats(self._directory.nodes(), self._directory.token_of, timeout)

    def capacity(self) -> int:
        """Execs the healthy nodes run at once: a good ``concurrency`` for grading."""
        return self._directory.capacity()

    def wait_for(self, count: int, timeout: float = 120.0) -> list[FleetNode]:
        """Wait until ``count`` nodes are healthy (e.g. after the cluster grew); those nodes.

        Raises:
            NoHealthyNodeError: fewer after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.refresh()
            healthy = self._directory.placeable()
            if len(healthy) >= count:
                return healthy
            if time.monotonic() > deadline:
                raise NoHealthyNodeError(
                    f"{len(healthy)} healthy fleet node(s) after {timeout:g}s, wanted {count}: "
                    + str(no_healthy_node(self._directory.nodes()))
                )
            time.sleep(0.2)

    def close(self) -> None:
        """Stop every node (drain, remove its files), kill the actors. Idempotent."""
        if not self._started:
            return
        self._started = False
        self._closed = True
        atexit.unregister(self.close)
        self._stopping.set()
        self._wake.set()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(timeout=30.0)
        self._directory.closed = True
        with contextlib.ExitStack() as stack:
            if self._probe is not None:
                stack.callback(self._probe.close)
            if self._joins is not None:
                stack.callback(self._joins.shutdown, wait=False, cancel_futures=True)
            for client in list(self._clients):
                stack.callback(client.close)
            stack.callback(self._write_sd)  # (runs after _stop_members: no targets left)
            stack.callback(self._stop_members)

    def __enter__(self) -> RayFleet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayFleet({', '.join(f'{n.tag}={n.state.value}' for n in self.nodes())})"

    # -- following the cluster ---------------------------------------------------------

    def refresh(self) -> list[FleetNode]:
        """Bring the fleet in step with the cluster now (the monitor does this every
        ``poll_interval``); the nodes afterwards."""
        if not self._started:
            return self.nodes()
        ray = _ray()
        with self._lock:
            rows = ray.nodes()
            alive = {row["NodeID"]: row for row in rows if row.get("Alive")}
            dead = {row["NodeID"]: row for row in rows if not row.get("Alive")}
            draining = self._draining_nodes()
            for member in list(self._members.values()):
                self._update(member, alive, dead, draining)
            for node_id, row in alive.items():
                if self._eligible(row) and not self._runs_on(node_id) and self._may_start(node_id):
                    self._launch(node_id, row)
            self._write_sd()
        return self.nodes()

    def _write_sd(self) -> None:
        if self._sd_file is None:
            return
        try:
            self._sd_text = write_sd_file(self._sd_file, self.nodes(), self._sd_text)
        except OSError as exc:  # the fleet works on; the operator's scrape is stale
            log.warning("could not write %s: %s", self._sd_file, exc)

    def check(self, tag: str) -> None:
        """Re-examine node ``tag`` now (its clients call this after an error)."""
        if self._started:
            self.refresh()

    def _follow(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._poll_interval)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.refresh()
            except Exception:  # the next round tries again; a dead monitor would hide losses
                log.exception("fleet refresh failed")

    def _update(
        self,
        member: _Member,
        alive: Mapping[str, Any],
        dead: Mapping[str, Any],
        draining: set[str],
    ) -> None:
        entry = self._directory.get(member.tag)
        if entry is None or entry.state.ended:
            return
        if member.ray_node_id not in alive:
            row = dead.get(member.ray_node_id, {})
            why = row.get("DeathReasonMessage") or "it left the cluster"
            self._lose(member, f"its Ray node died ({why})")
            return
        if entry.state is NodeState.STARTING:
            self._check_start(member)
            return
        self._probe_member(member, entry, member.ray_node_id in draining)

    def _check_start(self, member: _Member) -> None:
        ray = _ray()
        if member.joining:
            return
        done, _ = ray.wait([member.ready], timeout=0)
        if not done:
            if time.monotonic() - member.started > self._startup_timeout:
                self._fail(member, f"did not start within {self._startup_timeout:g}s")
            return
        try:
            info = ray.get(member.ready)
        except Exception as exc:
            self._fail(member, _short(exc))
            return
        if info.get("ray_node_id") != member.ray_node_id:  # affinity is hard; never trust blindly
            self._fail(member, f"its actor ran on Ray node {info.get('ray_node_id')}, not its own")
            return
        token = info.get("token")
        self._directory.set_token(member.tag, token)
        self._directory.update(
            member.tag, address=info["address"], pid=int(info["pid"]), auth=token is not None
        )
        bakes = self._directory.bakes()
        if not bakes:
            self._join(member)
            return
        member.joining = True
        assert self._joins is not None
        self._joins.submit(self._replay_bakes, member, bakes)

    def _replay_bakes(self, member: _Member, bakes: list[dict[str, Any]]) -> None:
        try:
            with self.direct_client(member.tag) as one:
                for spec in bakes:
                    one.bake_template(**spec)
        except Exception as exc:
            with self._lock:
                self._fail(member, f"could not bake the fleet's templates: {_short(exc)}")
            return
        with self._lock:
            member.joining = False
            self._join(member)

    def _join(self, member: _Member) -> None:
        entry = self._directory.get(member.tag)
        if entry is None or entry.state is not NodeState.STARTING:
            return
        self._probe_member(member, entry, draining=False, joining=True)
        joined = self._directory.get(member.tag)
        if joined is not None and joined.state.serves_sessions:
            self._backoff.pop(member.ray_node_id, None)
            log.info("fleet node %s joined at %s", member.tag, joined.address)

    def _probe_member(
        self, member: _Member, entry: FleetNode, draining: bool, joining: bool = False
    ) -> None:
        assert self._probe is not None
        headers = bearer_headers(self._directory.token_of(member.tag), environ={})
        try:
            resp = self._probe.get(entry.address + "/v1/health", headers=headers)
            health = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            health = None
        if not isinstance(health, dict):
            member.misses += 1
            if member.misses >= MISSES_BEFORE_LOST:
                self._lose(member, f"it did not answer {member.misses} health checks")
            return
        member.misses = 0
        if health.get("status") == "draining":
            # A LocalNode drains only when its owner (the actor) died or it was told to stop.
            self._lose(member, "its node is shutting down (its actor died)")
            return
        load = NodeLoad.from_health(health, stamp=entry.load.stamp + 1)
        state = NodeState.DRAINING if draining else NodeState.HEALTHY
        if joining or entry.state in (NodeState.HEALTHY, NodeState.DRAINING):
            templates = tuple(str(t) for t in health.get("templates") or ())
            self._directory.update(member.tag, state=state, load=load, templates=templates)

    def _lose(self, member: _Member, reason: str) -> None:
        entry = self._directory.update(member.tag, state=NodeState.LOST, error=reason)
        log.warning("fleet node %s lost: %s", member.tag, entry.error)
        self._back_off(member)  # if its Ray node lives on, the next node there waits a bit
        self._kill(member)

    def _fail(self, member: _Member, reason: str) -> None:
        self._directory.update(member.tag, state=NodeState.FAILED, error=reason)
        log.warning("fleet node %s failed to start: %s", member.tag, reason)
        self._back_off(member)
        self._kill(member)

    def _back_off(self, member: _Member) -> None:
        """Double the wait before the next node on this Ray node (a node that keeps dying)."""
        _, wait = self._backoff.get(member.ray_node_id, (0.0, RESTART_BACKOFF_SECONDS / 2))
        wait = min(wait * 2, 300.0)
        self._backoff[member.ray_node_id] = (time.monotonic() + wait, wait)

    def _kill(self, member: _Member) -> None:
        with contextlib.suppress(Exception):
            _ray().kill(member.actor, no_restart=True)

    def _runs_on(self, ray_node_id: str) -> bool:
        for member in self._members.values():
            entry = self._directory.get(member.tag)
            if member.ray_node_id == ray_node_id and entry is not None and not entry.state.ended:
                return True
        return False

    def _may_start(self, ray_node_id: str) -> bool:
        retry_at, _ = self._backoff.get(ray_node_id, (0.0, 0.0))
        return time.monotonic() >= retry_at

    def _eligible(self, row: Mapping[str, Any]) -> bool:
        if self._resource is None:
            return True
        resources = row.get("Resources") or {}
        return float(resources.get(self._resource, 0) or 0) > 0

    def _launch(self, ray_node_id: str, row: Mapping[str, Any]) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        tag = new_tag(self._members)
        actor = (
            _actor_class()
            .options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(ray_node_id, soft=False),
                num_cpus=self._num_cpus,
                max_restarts=0,
                max_concurrency=16,
            )
            .remote(
                tag,
                row["NodeManagerAddress"],
                port=self._port,
                options=self._options,
            )
        )
        member = _Member(tag, ray_node_id, actor, actor.info.remote())
        self._members[tag] = member
        self._directory.put(FleetNode(tag, ray_node_id))

    def _pending(self) -> bool:
        return any(n.state is NodeState.STARTING for n in self._directory.nodes())

    def _draining_nodes(self) -> set[str]:
        # Ray's autoscaler drains a node before removing it (KubeRay scale-down); the
        # list is only exposed by Ray's internal state API, so a missing one means none.
        try:
            from ray._private.state import state

            return set(state.get_draining_nodes())
        except Exception:
            return set()

    def _stop_members(self) -> None:
        ray = _ray()
        with self._lock:
            members = list(self._members.values())
        stops = []
        for member in members:
            entry = self._directory.get(member.tag)
            if entry is not None and not entry.state.ended:
                with contextlib.suppress(Exception):
                    stops.append(member.actor.stop.remote())
        if stops:
            drain = float(self._options.get("drain_timeout") or 30.0)
            with contextlib.suppress(Exception):
                ray.wait(stops, num_returns=len(stops), timeout=drain + 15.0)
        for member in members:
            self._kill(member)
            self._directory.update(member.tag, state=NodeState.STOPPED)

    def _check_started(self) -> None:
        if not self._started:
            raise CollimateUsageError(
                "the RayFleet is not started; use it as a context manager "
                "(with RayFleet() as fleet: ...) or call start()"
            )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Busy)): ", re.MULTILINE)


def _short(exc: BaseException, limit: int = 400) -> str:
    """What went wrong, in a line: for an actor that died in its constructor, the
    exception it raised (Ray's own message around it is mostly a traceback).

    >>> _short(RuntimeError("ray::NodeHost.__init__()\\n  File x\\nValueError: bad port"))
    'ValueError: bad port'
    """
    text = _ANSI.sub("", str(exc))
    found = list(_RAISED.finditer(text))
    text = text[found[-1].start() :] if found else f"{type(exc).__name__}: {text}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
