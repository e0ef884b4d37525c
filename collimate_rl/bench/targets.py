"""The project's performance targets, checked against a run's sections.

>>> from collimate_rl.bench.report import Section
>>> mem = Section("memory", "m", ["measure", "per session MiB", "all"])
>>> mem.add(["unique (USS)", "1.50", "150"], {"measure": "unique (USS)", "per_session_mib": 1.5})
>>> section = targets_section([mem])
>>> section.rows[0][1:]
['1.50 MiB', '< 5 MiB', 'yes']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from collimate_rl.bench import grpo, latency
from collimate_rl.bench.report import Section, fmt, pct_text, times_text
from collimate_rl.bench.scaling import mean_rate
from collimate_rl.bench.stats import ratio

__all__ = ["targets_section"]


def _rows(sections: Sequence[Section], key: str) -> list[dict[str, Any]]:
    return next((s.data for s in sections if s.key == key), [])


def _find(rows: list[dict[str, Any]], field: str, value: Any) -> dict[str, Any] | None:
    return next((row for row in rows if row.get(field) == value), None)


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def _pct(value: float) -> str:
    # one decimal: a ratio just under its target must not read as the target (49.8%, not 50%)
    return pct_text(value, 1)


def _times(value: float) -> str:
    return times_text(value, 2)


def targets_section(sections: Sequence[Section]) -> Section:
    """One row per target the run measured: the value, the goal and whether it is met."""
    out = Section(
        key="targets",
        title="Targets (2 cores, side by side in this run)",
        columns=["target", "measured", "goal", "met"],
    )

    def add(
        name: str, value: float, text: Callable[[float], str], goal: str, ok: bool | None
    ) -> None:
        met = "-" if ok is None else _yes(ok)
        out.add([name, text(value), goal, met], {"target": name, "value": value, "met": ok})

    task_set = "humaneval" if _rows(sections, "grpo_humaneval") else "collimate_basic"
    rows = _rows(sections, f"grpo_{task_set}")
    step, episode, oneshot, floor, bwrap, skyrl = (
        _find(rows, "runner", r)
        for r in (
            grpo.ENV_STEP,
            grpo.ENV_EPISODE,
            grpo.GRADE_ONESHOT,
            grpo.FLOOR,
            grpo.BWRAP,
            grpo.SKYRL,
        )
    )
    if step and floor:
        value = ratio(step["rollouts_per_s"], floor["rollouts_per_s"])
        add(
            f"{task_set}: env step vs warm-fork floor",
            value,
            _pct,
            ">= 50% (goal 75%)",
            value >= 0.5,
        )
    if step and bwrap and not bwrap["skipped"]:
        value = ratio(step["rollouts_per_s"], bwrap["rollouts_per_s"])
        add(f"{task_set}: env step vs bwrap + python -S", value, _times, ">= 2x", value >= 2)
    if episode and floor:
        value = ratio(episode["rollouts_per_s"], floor["rollouts_per_s"])
        add(f"{task_set}: env reset + step vs floor", value, _pct, ">= 40%", value >= 0.4)
    if oneshot and bwrap and not bwrap["skipped"]:
        value = ratio(oneshot["rollouts_per_s"], bwrap["rollouts_per_s"])
        add(
            f"{task_set}: grade() one-shot vs bwrap + python -S",
            value,
            _times,
            ">= 1x",
            value >= 1,
        )
    if step and floor and not math.isnan(step.get("cpu_ms_per_rollout", math.nan)):
        value = ratio(step["cpu_ms_per_rollout"], floor["cpu_ms_per_rollout"])
        add(
            f"{task_set}: CPU per rollout, env step vs floor",
            value,
            _times,
            "<= 2x",
            value <= 2,
        )
    if step and skyrl and not skyrl["skipped"]:
        value = ratio(step["rollouts_per_s"], skyrl["rollouts_per_s"])
        add(f"{task_set}: env step vs skyrl-gym lcb grader", value, _times, "(no goal)", None)
    noop = _find(_rows(sections, "latency"), "runner", latency.ENV_STEP)
    if noop:
        value = noop["p50_ms"]
        add("no-op env.step p50", value, lambda v: f"{fmt(v)} ms", "< 5 ms", value < 5)
    fork64 = _find(_rows(sections, "forks"), "k", 64)
    if fork64:
        value = fork64["p50_ms"]
        add(
            "fork of a 64-wide group, p50", value, lambda v: f"{fmt(v)} ms", "< 100 ms", value < 100
        )
    uss = _find(_rows(sections, "memory"), "measure", "unique (USS)")
    if uss:
        value = uss["per_session_mib"]
        add(
            "unique memory per idle forked session",
            value,
            lambda v: f"{fmt(v)} MiB",
            "< 5 MiB",
            value < 5,
        )
    runs = _rows(sections, "scaling_sessions")
    sessions = [row for row in runs if not row.get("again")]
    if len(sessions) >= 2:
        first, last = sessions[0], sessions[-1]
        value = ratio(mean_rate(runs, last["sessions"]), mean_rate(runs, first["sessions"]))
        name = f"no-op throughput, {last['sessions']} vs {first['sessions']} live sessions"
        add(name, value, _pct, "flat (>= 90%)", not math.isnan(value) and value >= 0.9)
    return out
