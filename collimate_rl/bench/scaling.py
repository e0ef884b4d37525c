"""How throughput scales: with the GRPO group size, with grading threads, with live sessions.

* group size: one group of K on the bundled tasks, rollouts/s for ``step`` and ``reset + step``;
* concurrency: a fixed G x K vector env grading with 1, 2, 4, ... threads;
* live sessions: no-op exec latency and throughput in one session while N - 1 idle forked
  sessions stay alive (the node must not slow down as sessions pile up).

>>> rounds_for(4, rounds=1, min_rollouts=16)
4
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from collimate_rl.bench.forks import delete_sessions, fork_idle, process_tree, tree_memory
from collimate_rl.bench.grpo import open_vector_env, run_episodes, run_vector_env
from collimate_rl.bench.report import Section, fmt, pct_text
from collimate_rl.bench.stats import Summary, closed_loop, latencies_ms, ratio

__all__ = ["concurrency_section", "group_size_section", "live_sessions_section", "rounds_for"]

_TASK_SET = "collimate-basic"


def rounds_for(size: int, *, rounds: int, min_rollouts: int) -> int:
    """Episodes to run for a group of ``size`` so that at least ``min_rollouts`` are graded."""
    return max(rounds, math.ceil(min_rollouts / size))


def group_size_section(
    client: Any,
    sizes: Sequence[int],
    *,
    rounds: int,
    min_rollouts: int,
    progress: Callable[[str], None],
) -> Section:
    """Rollouts/s of one group of K, for each K."""
    section = Section(
        key="scaling_group_size",
        title=f"Throughput vs group size (one group of K, {_TASK_SET})",
        columns=["K", "rollouts", "step rollouts/s", "reset + step rollouts/s", "step vs K=min"],
    )
    base = math.nan
    for k in sizes:
        n_rounds = rounds_for(k, rounds=rounds, min_rollouts=min_rollouts)
        progress(f"scaling: group size {k} x {n_rounds} rounds")
        run = run_vector_env(client, _TASK_SET, 1, k, n_rounds)
        step, episode = run.results()
        base = step.rate if math.isnan(base) else base
        section.add(
            [
                str(k),
                str(step.rollouts),
                fmt(step.rate, 1),
                fmt(episode.rate, 1),
                pct_text(ratio(step.rate, base)),
            ],
            {
                "k": k,
                "rollouts": step.rollouts,
                "step_rollouts_per_s": step.rate,
                "episode_rollouts_per_s": episode.rate,
            },
        )
    return section


def concurrency_section(
    client: Any,
    levels: Sequence[int],
    *,
    groups: int,
    size: int,
    rounds: int,
    progress: Callable[[str], None],
) -> Section:
    """Rollouts/s of a ``groups`` x ``size`` vector env for each grading-thread count."""
    section = Section(
        key="scaling_concurrency",
        title=f"Throughput vs grading threads (G={groups} x K={size}, {_TASK_SET})",
        columns=["threads", "step rollouts/s", "reset + step rollouts/s", "step vs 1 thread"],
        notes=[
            "On this node a step is one batch request whatever the env's `concurrency` (it "
            "sizes the per-exec fallback's threads on a daemon or a gateway): rows differ by "
            "noise only. The node runs 4 execs per core at once; the rest wait."
        ],
    )
    base = math.nan
    envs = open_vector_env(client, _TASK_SET, groups, size)
    try:
        runs = []
        for c in levels:
            progress(f"scaling: {c} grading threads")
            # The env's grading pool size: the `concurrency=` argument of make_vec.
            envs.unwrapped.concurrency = c
            runs.append(run_episodes(envs, rounds))
    finally:
        envs.close()
    for c, run in zip(levels, runs, strict=True):
        step, episode = run.results()
        base = step.rate if math.isnan(base) else base
        section.add(
            [str(c), fmt(step.rate, 1), fmt(episode.rate, 1), pct_text(ratio(step.rate, base))],
            {
                "threads": c,
                "step_rollouts_per_s": step.rate,
                "episode_rollouts_per_s": episode.rate,
            },
        )
    return section


def live_sessions_section(
    client: Any,
    counts: Sequence[int],
    *,
    n: int,
    seconds: float,
    progress: Callable[[str], None],
    node_pid: int | None = None,
    alternations: int = 1,
) -> Section:
    """No-op latency and 2-client throughput in one session with N sessions alive.

    With ``node_pid``, also the unique memory (USS) of the node's whole process tree.
    ``alternations``: how many times the largest count is measured, each time between two
    runs of the first (the idle sessions deleted and forked again in between), so that a
    few seconds of a busy machine weigh on one run of several, not on the comparison.
    """
    section = Section(
        key="scaling_sessions",
        title="Exec latency and throughput vs live idle sessions",
        columns=[
            "live sessions",
            "p50 ms",
            "p99 ms",
            "no-op/s (2 clients)",
            "vs 1 session",
            "node tree USS MiB",
        ],
        notes=[
            "The probe session is one of the N; the others are idle forks of it.",
            "The single session is measured first and again after the sweep (the others "
            "deleted), in turns with the largest count (forked again): '(again)' rows. "
            "'vs 1 session' is against the mean of the single session's runs; the target "
            "compares the means of both counts' runs, so the machine's drift is in both.",
        ],
    )
    probe = str(client.create_session("python3")["session_id"])
    idle: list[str] = []

    def noop() -> object:
        return client.session_exec(probe, code="pass", timeout_seconds=10)

    def measure(count: int) -> dict[str, Any]:
        s = Summary.of(latencies_ms(noop, n, warmup=10))
        rate = closed_loop(noop, 2, seconds)
        return {"sessions": count, "p50_ms": s.p50, "p99_ms": s.p99, "noop_per_s": rate}

    rows: list[dict[str, Any]] = []
    try:
        for count in sorted(counts):
            if count - 1 > len(idle):
                progress(f"scaling: forking up to {count} live sessions")
                idle += fork_idle(client, probe, count - 1 - len(idle))
            progress(f"scaling: exec with {count} live sessions")
            time.sleep(0.5)  # let the node finish the forks' bookkeeping
            row = measure(count)
            uss = math.nan if node_pid is None else tree_memory(process_tree(node_pid)).uss_kib
            rows.append(dict(row, node_uss_mib=uss / 1024))
        # one session again once the others are gone, then in turns with the largest
        # count: the machine's drift over the run sits in both means (``mean_rate``)
        largest = len(idle) + 1
        bracket = bool(rows) and rows[0]["sessions"] == 1
        for turn in range(max(alternations, 1) if bracket else 1):
            if turn:
                progress(f"scaling: forking {largest - 1} idle sessions again")
                idle = fork_idle(client, probe, largest - 1)
                time.sleep(0.5)
                rows.append(dict(measure(largest), node_uss_mib=math.nan, again=True))
            progress(f"scaling: deleting {len(idle)} idle sessions, then exec with one again")
            delete_sessions(client, idle)
            idle = []
            time.sleep(0.5)
            if bracket:
                rows.append(dict(measure(1), node_uss_mib=math.nan, again=True))
    finally:
        progress(f"scaling: deleting {len(idle) + 1} sessions")
        delete_sessions(client, [*idle, probe])
    base = mean_rate(rows, rows[0]["sessions"]) if rows else math.nan
    for row in rows:
        section.add(
            [
                f"{row['sessions']} (again)" if row.get("again") else str(row["sessions"]),
                fmt(row["p50_ms"]),
                fmt(row["p99_ms"]),
                fmt(row["noop_per_s"], 0),
                pct_text(ratio(row["noop_per_s"], base)),
                fmt(row["node_uss_mib"], 0),
            ],
            row,
        )
    return section


def mean_rate(rows: list[dict[str, Any]], sessions: int) -> float:
    """The mean no-op rate of every run with ``sessions`` live sessions (NaN: none).

    >>> rows = [{"sessions": 1, "noop_per_s": 90.0}, {"sessions": 10, "noop_per_s": 50.0},
    ...         {"sessions": 1, "noop_per_s": 110.0, "again": True}]
    >>> mean_rate(rows, 1), mean_rate(rows, 10)
    (100.0, 50.0)
    """
    rates = [float(r["noop_per_s"]) for r in rows if r["sessions"] == sessions]
    return sum(rates) / len(rates) if rates else math.nan
