"""Fork-group latency for K children, and the unique memory of an idle forked session.

Memory is read from ``/proc/<pid>/smaps_rollup`` of every process under the node (the
sessions run there as separate processes): USS (private pages) and PSS, summed over the
node's process tree before and after forking ``N`` idle sessions, divided by ``N``.

>>> tree = process_tree(os.getpid())
>>> tree[0] == os.getpid()
True
>>> tree_memory([os.getpid()]).uss_kib > 0
True
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from collimate_rl.bench.report import Section, fmt
from collimate_rl.bench.stats import Summary

__all__ = [
    "TreeMemory",
    "delete_sessions",
    "fork_idle",
    "fork_section",
    "memory_section",
    "process_tree",
    "tree_memory",
]

#: The most children the node forks in one call.
_FORK_MAX = 256


def delete_sessions(client: Any, session_ids: Sequence[str], workers: int = 4) -> None:
    """Delete sessions, a few at a time (deletion never raises, per the contract)."""
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(client.delete_session, session_ids))


def fork_idle(client: Any, parent: str, count: int) -> list[str]:
    """Fork ``parent`` into ``count`` idle children (in calls of at most 256)."""
    children: list[str] = []
    try:
        while len(children) < count:
            width = min(_FORK_MAX, count - len(children))
            reply = client.fork_session(parent, width)
            children += [str(child["session_id"]) for child in reply["children"]]
    except BaseException:
        delete_sessions(client, children)
        raise
    return children


def fork_section(
    client: Any, widths: Sequence[int], repeats: int, progress: Callable[[str], None]
) -> Section:
    """p50/p99 of one ``fork_session(parent, K)`` call for each K (children deleted after)."""
    section = Section(
        key="forks",
        title=f"Fork of a session into a K-wide group, {repeats} samples each",
        columns=["K", "p50 ms", "p99 ms", "p50 per child ms"],
        notes=["One `fork_session` call over HTTP; all K children exist when it returns."],
    )
    parent = str(client.create_session("python3")["session_id"])
    try:
        delete_sessions(client, fork_idle(client, parent, 1))  # warm-up
        for k in widths:
            progress(f"forks: K={k}")
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                children = fork_idle(client, parent, k)
                samples.append((time.perf_counter() - t0) * 1e3)
                delete_sessions(client, children)
            s = Summary.of(samples)
            section.add(
                [str(k), fmt(s.p50), fmt(s.p99), fmt(s.p50 / k)],
                {"k": k, "p50_ms": s.p50, "p99_ms": s.p99, "mean_ms": s.mean, "n": s.n},
            )
    finally:
        client.delete_session(parent)
    return section


def process_tree(root: int) -> list[int]:
    """``root`` and every live descendant, parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo += sorted(children.get(pid, []))
    return out


@dataclass(frozen=True)
class TreeMemory:
    """Summed memory of a set of processes (KiB)."""

    processes: int
    uss_kib: int
    pss_kib: int
    rss_kib: int


def tree_memory(pids: Sequence[int]) -> TreeMemory:
    """USS (Private_Clean + Private_Dirty), PSS and RSS summed over ``pids``."""
    uss = pss = rss = seen = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue  # gone meanwhile, or a kernel thread
        kib = {k.strip(): int(v.split()[0]) for k, v in fields.items() if v.strip().endswith("kB")}
        uss += kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0)
        pss += kib.get("Pss", 0)
        rss += kib.get("Rss", 0)
        seen += 1
    return TreeMemory(seen, uss, pss, rss)


def memory_section(
    client: Any, node_pid: int, sessions: int, progress: Callable[[str], None]
) -> Section:
    """Memory per idle forked session: the node tree's growth when ``sessions`` are forked."""
    progress(f"memory: {sessions} idle forked sessions")
    parent = str(client.create_session("python3")["session_id"])
    children: list[str] = []
    try:
        client.session_exec(parent, code="pass", timeout_seconds=10)
        time.sleep(0.5)
        before = tree_memory(process_tree(node_pid))
        children = fork_idle(client, parent, sessions)
        time.sleep(0.5)
        after = tree_memory(process_tree(node_pid))
    finally:
        delete_sessions(client, children)
        client.delete_session(parent)
    per_process = (after.processes - before.processes) / sessions
    section = Section(
        key="memory",
        title=f"Memory per idle forked session ({sessions} forked at once)",
        columns=["measure", "per session MiB", f"all {sessions} MiB"],
        notes=[
            f"Node process tree before/after: {before.processes} -> {after.processes} processes "
            f"({per_process:.1f} per session: a light session is a record in its template's "
            "master, with no process of its own; a session with a server, one process)."
        ],
    )
    for name, a, b in (
        ("unique (USS)", after.uss_kib, before.uss_kib),
        ("proportional (PSS)", after.pss_kib, before.pss_kib),
        ("resident (RSS, shared pages counted per process)", after.rss_kib, before.rss_kib),
    ):
        delta_mib = (a - b) / 1024
        section.add(
            [name, fmt(delta_mib / sessions), fmt(delta_mib, 1)],
            {"measure": name, "per_session_mib": delta_mib / sessions, "total_mib": delta_mib},
        )
    return section
