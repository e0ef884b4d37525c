"""Scale-out on a simulated Ray cluster: what routing costs per exec, and what a fleet sustains.

``collimate bench --only cluster`` starts ``ray.cluster_utils.Cluster`` on this machine
with 1, then 2, then 3 raylets (one CPU each) and one ``RayFleet`` that follows them.
At each size, side by side and interleaved:

* a no-op ``session_exec`` through a plain client of one node (HTTP to the node's
  address), through the fleet client (the same HTTP plus routing), and through the node's
  Ray actor (``ray.get(actor.call.remote(...))``: Ray's transport to the actor, then
  the actor's HTTP to its node);
* the driver's CPU per routed exec, which caps what one driver process can push;
* closed-loop one-shot execs through the fleet client with four clients per node, and
  how they spread over the nodes.

Every simulated node shares this machine's cores, so the throughput does not grow with
the node count here; :func:`cluster_model` turns the measured one-node rate and the
driver's CPU per exec into a cluster estimate (docs/scale-out.md explains the model).

>>> model = cluster_model(node_rate=100.0, driver_cpu_ms=0.5, sizes=(1, 4, 32))
>>> [round(rate) for _, rate, _ in model]
[100, 400, 2000]
>>> model[-1][2]
'driver'
"""

from __future__ import annotations

import importlib.util
import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collimate_rl.bench.report import Section, fmt, pct_text
from collimate_rl.bench.stats import Summary, closed_loop, ratio

__all__ = [
    "FULL_CLUSTER",
    "QUICK_CLUSTER",
    "SKIP_MESSAGE",
    "ClusterPlan",
    "cluster_model",
    "cluster_sections",
    "measure_fleet",
    "routing_cost_us",
    "sections_of",
]

SKIP_MESSAGE = "cluster: skipped: Ray is not installed (pip install 'collimate-rl[ray]')"
#: Fleet sizes the model extrapolates to (nodes, one per machine).
MODEL_SIZES = (1, 2, 4, 8, 16, 32, 64)
_PASS = {"code": "pass", "timeout_seconds": 10}


@dataclass(frozen=True)
class ClusterPlan:
    """How much to measure at each cluster size."""

    sizes: tuple[int, ...]
    samples: int
    seconds: float
    clients_per_node: int = 4


QUICK_CLUSTER = ClusterPlan(sizes=(1, 2, 3), samples=30, seconds=1.0)
FULL_CLUSTER = ClusterPlan(sizes=(1, 2, 3), samples=300, seconds=5.0)


@dataclass(frozen=True)
class FleetSample:
    """One cluster size's measurements."""

    nodes: int
    direct: Summary
    routed: Summary
    ray_actor: Summary
    overhead_ms: float  # median of the paired (routed - direct) differences
    routing_us: float  # the router's own work per call, in-process
    routed_cpu_ms: float  # driver CPU per routed exec
    direct_cpu_ms: float  # driver CPU per direct exec
    execs_per_s: float
    spread: dict[str, int]


def _timed_round(calls: dict[str, Callable[[], object]], turn: int) -> dict[str, float]:
    """Each call once, back to back, starting with a different one each turn: wall ms."""
    names = list(calls)
    took = {}
    for name in names[turn % len(names) :] + names[: turn % len(names)]:
        call = calls[name]
        t0 = time.perf_counter()
        call()
        took[name] = (time.perf_counter() - t0) * 1e3
    return took


def routing_cost_us(directory: Any, session_id: str, n: int = 20000) -> float:
    """The fleet client's own work per session call, in-process (no I/O): microseconds.

    What a routed call adds to the node client's: find the node from the id, count the
    call in and out, check the node is still alive.
    """
    from collimate_rl.ray._router import Router

    router = Router(directory)
    t0 = time.perf_counter()
    for _ in range(n):
        node, _sid = router.locate(session_id)
        router.started(node, None)
        router.finished(node)
        router.confirm(node)
    return (time.perf_counter() - t0) * 1e6 / n


def _cpu_ms_per_call(fn: Callable[[], object], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) * 1e3 / n


def measure_fleet(fleet: Any, plan: ClusterPlan, progress: Callable[[str], None]) -> FleetSample:
    """Measure a started fleet: per-exec latency three ways, driver CPU, throughput."""
    import ray

    nodes = [n for n in fleet.nodes() if n.state.value == "healthy"]
    client = fleet.client()
    direct = {n.tag: fleet.direct_client(n.tag) for n in nodes}
    sessions = {
        n.tag: str(client.create_session("python3", node=n.tag)["session_id"]) for n in nodes
    }
    local_ids = {tag: sid.split(".", 1)[1] for tag, sid in sessions.items()}
    try:
        progress(f"cluster: {len(nodes)} node(s): {plan.samples} paired no-op execs")

        def three_ways(tag: str) -> dict[str, Callable[[], object]]:
            actor, local, one = fleet.host_actor(tag), local_ids[tag], direct[tag]
            return {
                "direct": lambda: one.session_exec(local, **_PASS),
                "routed": lambda: client.session_exec(sessions[tag], **_PASS),
                "ray": lambda: ray.get(actor.call.remote("session_exec", local, **_PASS)),
            }

        lat: dict[str, list[float]] = {"direct": [], "routed": [], "ray": []}
        pairs: list[float] = []
        for i in range(plan.samples + 3):
            took = _timed_round(three_ways(nodes[i % len(nodes)].tag), i)
            if i >= 3:  # the first rounds warm the connections up
                for name, ms in took.items():
                    lat[name].append(ms)
                pairs.append(took["routed"] - took["direct"])
        first = nodes[0].tag
        routing_us = routing_cost_us(client.directory, sessions[first])
        routed_cpu = _cpu_ms_per_call(
            lambda: client.session_exec(sessions[first], **_PASS), plan.samples
        )
        direct_cpu = _cpu_ms_per_call(
            lambda: direct[first].session_exec(local_ids[first], **_PASS), plan.samples
        )
        clients = plan.clients_per_node * len(nodes)
        progress(f"cluster: {len(nodes)} node(s): {clients} clients for {plan.seconds:g} s")
        before = Counter(client.calls_by_node())
        rate = closed_loop(lambda: client.exec_once("python3", **_PASS), clients, plan.seconds)
        spread = dict(Counter(client.calls_by_node()) - before)
    finally:
        for sid in sessions.values():
            client.delete_session(sid)
        for one in direct.values():
            one.close()
        client.close()
    return FleetSample(
        nodes=len(nodes),
        direct=Summary.of(lat["direct"]),
        routed=Summary.of(lat["routed"]),
        ray_actor=Summary.of(lat["ray"]),
        overhead_ms=statistics.median(pairs),
        routing_us=routing_us,
        routed_cpu_ms=routed_cpu,
        direct_cpu_ms=direct_cpu,
        execs_per_s=rate,
        spread=spread,
    )


def cluster_model(
    node_rate: float, driver_cpu_ms: float, sizes: Sequence[int] = MODEL_SIZES
) -> list[tuple[int, float, str]]:
    """``(nodes, execs/s, what limits it)``: ``min(nodes * node_rate, driver ceiling)``.

    The driver ceiling is what one driver core can issue: ``1000 / driver_cpu_ms``.
    """
    ceiling = 1e3 / driver_cpu_ms if driver_cpu_ms > 0 else float("inf")
    out = []
    for n in sizes:
        nodes_rate = n * node_rate
        out.append((n, min(nodes_rate, ceiling), "nodes" if nodes_rate <= ceiling else "driver"))
    return out


def cluster_sections(plan: ClusterPlan, progress: Callable[[str], None]) -> list[Section]:
    """Start a simulated cluster, measure the fleet at each size; the sections (or a skip)."""
    if importlib.util.find_spec("ray") is None:
        progress(SKIP_MESSAGE)
        return [_skipped()]
    import ray
    from ray.cluster_utils import Cluster

    from collimate_rl.ray import RayFleet

    progress("cluster: starting a simulated Ray cluster (a head raylet, 1 CPU)")
    cluster: Any = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    samples: list[FleetSample] = []
    try:
        ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
        with RayFleet(poll_interval=1.0) as fleet:
            for size in plan.sizes:
                while len(cluster.list_all_nodes()) < size:
                    cluster.add_node(num_cpus=1)
                fleet.wait_for(size, timeout=300)
                samples.append(measure_fleet(fleet, plan, progress))
    finally:
        ray.shutdown()
        cluster.shutdown()
    return sections_of(samples)


def sections_of(samples: Sequence[FleetSample]) -> list[Section]:
    """The routing table and the cluster model of measured fleet sizes (smallest first)."""
    return [_routing_section(samples), _model_section(samples)]


def _skipped() -> Section:
    return Section(
        key="cluster_routing",
        title="Scale-out on a simulated Ray cluster",
        columns=["nodes"],
        notes=[SKIP_MESSAGE],
    )


def _routing_section(samples: Sequence[FleetSample]) -> Section:
    section = Section(
        key="cluster_routing",
        title="Fleet routing on a simulated Ray cluster (raylets on this machine), no-op exec",
        columns=[
            "nodes",
            "direct p50 ms",
            "fleet p50 ms",
            "routing overhead ms",
            "router work us/call",
            "Ray actor p50 ms",
            "driver CPU ms/exec (fleet / direct)",
            "exec_once/s (fleet)",
            "spread min/max",
        ],
        notes=[
            "direct: a plain client of the node over HTTP; fleet: the same through the fleet "
            "client; Ray actor: ray.get(actor.call.remote(...)), then the actor's HTTP to its node.",
            "Routing overhead: the median of the paired (fleet - direct) differences (each round "
            "starts with another runner); router work: the routing code alone, in-process.",
            "Every raylet shares this machine's cores: rates do not grow with the node count here.",
        ],
    )
    for s in samples:
        counts = sorted(s.spread.values()) or [0]
        section.add(
            [
                str(s.nodes),
                fmt(s.direct.p50),
                fmt(s.routed.p50),
                fmt(s.overhead_ms, 3),
                fmt(s.routing_us, 1),
                fmt(s.ray_actor.p50),
                f"{fmt(s.routed_cpu_ms)} / {fmt(s.direct_cpu_ms)}",
                fmt(s.execs_per_s, 1),
                pct_text(ratio(counts[0], counts[-1])),
            ],
            {
                "nodes": s.nodes,
                "direct_p50_ms": s.direct.p50,
                "routed_p50_ms": s.routed.p50,
                "ray_actor_p50_ms": s.ray_actor.p50,
                "routing_overhead_ms": s.overhead_ms,
                "router_us_per_call": s.routing_us,
                "routed_cpu_ms": s.routed_cpu_ms,
                "direct_cpu_ms": s.direct_cpu_ms,
                "exec_once_per_s": s.execs_per_s,
                "spread": s.spread,
            },
        )
    return section


def _model_section(samples: Sequence[FleetSample]) -> Section:
    one = samples[0]
    section = Section(
        key="cluster_model",
        title="Cluster model: no-op exec_once/s from the one-node rate and the driver's CPU",
        columns=["nodes (one per machine like this one)", "execs/s", "limited by"],
        notes=[
            f"rate(N) = min(N x {fmt(one.execs_per_s, 1)}/s measured on one node, "
            f"1000 / {fmt(one.routed_cpu_ms)} ms driver CPU per exec); "
            "graded rollouts: use the grpo section's rollouts/s as the node rate.",
        ],
    )
    for n, rate, limit in cluster_model(one.execs_per_s, one.routed_cpu_ms):
        section.add(
            [str(n), fmt(rate, 0), limit], {"nodes": n, "execs_per_s": rate, "limit": limit}
        )
    return section
