"""No-op exec latency: through ``env.step`` and the node's API, against unisolated runners.

The no-op is ``:`` through ``collimate/Shell-v0``'s ``env.step`` (a shell command in the
episode's session) and ``code="pass"`` everywhere else.

>>> RUNNERS[0]
"collimate Shell-v0 env.step(':') (isolated)"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collimate_rl.bench.baselines import SubprocessClient, WarmForkClient
from collimate_rl.bench.report import Section, fmt, times_text
from collimate_rl.bench.stats import Summary, latencies_ms, ratio

__all__ = ["RUNNERS", "latency_section", "shell_step_latencies"]

ENV_STEP = "collimate Shell-v0 env.step(':') (isolated)"
SESSION_EXEC = "collimate session exec, code='pass' (isolated)"
EXEC_ONCE = "collimate exec_once, code='pass' (isolated, fresh fork)"
SUBPROCESS = "subprocess python -S (no isolation)"
FLOOR = "warm fork (no isolation): floor"
RUNNERS = (ENV_STEP, SESSION_EXEC, EXEC_ONCE, SUBPROCESS, FLOOR)

_WARMUP = 3


def shell_step_latencies(client: Any, n: int) -> list[float]:
    """``n`` timed ``env.step(":")`` calls of one ``collimate/Shell-v0`` episode (ms)."""
    import gymnasium as gym

    import collimate_envs  # noqa: F401  (registers the ids)

    env = gym.make("collimate/Shell-v0", client=client, max_turns=n + _WARMUP + 1)
    try:
        env.reset(seed=0)
        return latencies_ms(lambda: env.step(":"), n, warmup=_WARMUP)
    finally:
        env.close()


def _session_latencies(client: Any, n: int) -> list[float]:
    session = str(client.create_session("python3")["session_id"])
    try:
        return latencies_ms(
            lambda: client.session_exec(session, code="pass", timeout_seconds=10), n, _WARMUP
        )
    finally:
        client.delete_session(session)


def _exec_once_latencies(client: Any, n: int) -> list[float]:
    return latencies_ms(
        lambda: client.exec_once("python3", code="pass", timeout_seconds=10), n, _WARMUP
    )


def latency_section(client: Any, n: int, progress: Callable[[str], None]) -> Section:
    """p50/p99 of the no-op on every runner, sequentially, ``n`` samples each."""
    samples: dict[str, list[float]] = {}
    progress(f"latency: {n} no-op steps/execs per runner")
    samples[ENV_STEP] = shell_step_latencies(client, n)
    samples[SESSION_EXEC] = _session_latencies(client, n)
    samples[EXEC_ONCE] = _exec_once_latencies(client, n)
    samples[SUBPROCESS] = _exec_once_latencies(SubprocessClient(), n)
    with WarmForkClient() as floor:
        samples[FLOOR] = _exec_once_latencies(floor, n)

    floor_p50 = Summary.of(samples[FLOOR]).p50
    section = Section(
        key="latency",
        title=f"No-op exec latency, sequential, {n} samples each",
        columns=["runner", "p50 ms", "p99 ms", "mean ms", "p50 vs floor"],
        notes=["Over the node's HTTP API on a unix socket; `:` is a shell command, `pass` Python."],
    )
    for name in RUNNERS:
        s = Summary.of(samples[name])
        section.add(
            [name, fmt(s.p50), fmt(s.p99), fmt(s.mean), times_text(ratio(s.p50, floor_p50))],
            {"runner": name, "p50_ms": s.p50, "p99_ms": s.p99, "mean_ms": s.mean, "n": s.n},
        )
    return section
