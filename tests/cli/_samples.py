"""Completions files with a known number of correct samples per task (collimate-basic).

Each task's reference solution passes its tests and its wrong solution fails them, so
the expected pass@k of a file can be computed by hand.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from collimate_envs.tasks import load_task_set

#: (correct, wrong) samples for the first four collimate-basic tasks.
MIX: tuple[tuple[int, int], ...] = ((3, 2), (1, 4), (0, 5), (5, 0))

#: pass@k of MIX, by hand: per task 1 - C(n-c, k)/C(n, k), then the mean over tasks.
#: k=1: (3/5 + 1/5 + 0 + 1)/4; k=2: (1 - 1/10 + 1 - 6/10 + 0 + 1)/4; k=5: (1 + 1 + 0 + 1)/4.
EXPECTED = {1: 0.45, 2: 0.575, 5: 0.75}


def fence(code: str) -> str:
    return f"Here you go:\n```python\n{code.rstrip()}\n```\n"


def rows(mix: Sequence[tuple[int, int]] = MIX, *, delay: float = 0.0) -> list[dict[str, str]]:
    """Completion rows, interleaved across tasks (so a task's samples are not adjacent)."""
    return [row for row, _ in _build(mix, delay)]


def truth(mix: Sequence[tuple[int, int]] = MIX) -> list[bool]:
    """Whether each row of :func:`rows` is a correct solution."""
    return [good for _, good in _build(mix, 0.0)]


def _build(mix: Sequence[tuple[int, int]], delay: float) -> list[tuple[dict[str, str], bool]]:
    tasks = list(load_task_set("collimate-basic"))[: len(mix)]
    prefix = f"import time\ntime.sleep({delay})\n" if delay else ""
    per_task: list[list[tuple[dict[str, str], bool]]] = []
    for task, (good, bad) in zip(tasks, mix, strict=True):
        assert task.reference_solution and task.wrong_solution
        samples = [(fence(prefix + task.reference_solution), True)] * good
        samples += [(fence(prefix + task.wrong_solution), False)] * bad
        per_task.append([({"task_id": task.task_id, "completion": s}, ok) for s, ok in samples])
    out = []
    for i in range(max(len(p) for p in per_task)):
        out += [p[i] for p in per_task if i < len(p)]
    return out


def write(path: Path, data: Sequence[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    return path


def result_rows(path: Path) -> list[dict[str, object]]:
    """The result rows of an eval output (header skipped)."""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return lines[1:]
