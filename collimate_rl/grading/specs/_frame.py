"""The exec a spec builds (``Program``) and the verdict frame it reads back (``Frame``)."""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

__all__ = ["RESULT_PREFIX", "Frame", "Program"]

RESULT_PREFIX = "COLLIMATE_RESULT"


class Program(NamedTuple):
    """One exec's worth of grading: the harness ``code`` and its ``files``.

    ``warm_code`` is the same exec for a sandbox that has the harness warm
    (the local node): a short stub, see :mod:`collimate_rl.grading._shipping`.
    """

    code: str
    files: list[dict[str, str]]
    warm_code: str = ""


class Frame(NamedTuple):
    """The harness's verdict, parsed from its result line."""

    passed: int
    total: int
    tests: list[dict[str, Any]]
    output_tail: str
    reward: float | None
    error: str | None
    raw: dict[str, Any]


def _frame_from_json(text: str) -> Frame | None:
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    passed, total = raw.get("passed"), raw.get("total")
    if type(passed) is not int or type(total) is not int or not 0 <= passed <= total:
        return None
    tests = raw.get("tests", [])
    tests = [t for t in tests if isinstance(t, dict)] if isinstance(tests, list) else []
    reward = raw.get("reward")
    if reward is not None:
        reward = float(reward) if isinstance(reward, (int, float)) else 0.0
        reward = 0.0 if math.isnan(reward) else max(0.0, min(1.0, reward))
    error = raw.get("error")
    tail = raw.get("output_tail", "")
    return Frame(
        passed=passed,
        total=total,
        tests=tests,
        output_tail=tail if isinstance(tail, str) else "",
        reward=reward,
        error=error if isinstance(error, str) else None,
        raw=raw,
    )
