"""grade_batch(on_result=...): every finished grade is handed over once, as it lands."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from collimate_rl.grading import GradeResult, agrade_batch, grade_batch

from .conftest import TEMPLATE
from .test_batch import INFRA, SPEC, FlakyClient, _mixed


def test_on_result_streams_each_grade_once_on_the_node(client: Any) -> None:
    completions, rewards = _mixed(7)
    landed: dict[int, GradeResult] = {}
    order: list[str] = []

    def on_result(index: int, result: GradeResult) -> None:
        assert index not in landed
        landed[index] = result
        order.append("result")

    results = grade_batch(
        client,
        TEMPLATE,
        completions,
        SPEC,
        concurrency=3,
        extract=False,
        on_result=on_result,
        progress=lambda done, total: order.append("progress"),
    )
    assert [landed[i] for i in range(7)] == results
    assert [r.reward for r in results] == rewards
    assert order == ["result", "progress"] * 7  # a result is out before its progress tick


@pytest.mark.parametrize("mode", ["zero", "skip"])
def test_on_result_with_infra_errors(mode: str) -> None:
    completions, _ = _mixed(6)
    for i in (2, 3):
        completions[i] = INFRA + completions[i]
    landed: dict[int, GradeResult] = {}
    grade_batch(
        FlakyClient(),
        TEMPLATE,
        completions,
        SPEC,
        concurrency=2,
        on_infra_error=mode,  # type: ignore[arg-type]
        extract=False,
        on_result=landed.__setitem__,
    )
    if mode == "zero":
        assert sorted(landed) == list(range(6))
        assert [i for i, r in landed.items() if r.infra_error] in ([2, 3], [3, 2])
    else:
        assert sorted(landed) == [0, 1, 4, 5]
        assert not any(r.infra_error for r in landed.values())


def test_async_on_result_matches_the_results() -> None:
    completions, _ = _mixed(5)
    completions[1] = INFRA + completions[1]
    landed: dict[int, GradeResult] = {}

    async def run() -> list[GradeResult]:
        return await agrade_batch(
            _AsyncFlaky(),
            TEMPLATE,
            completions,
            SPEC,
            concurrency=2,
            on_infra_error="zero",
            extract=False,
            on_result=landed.__setitem__,
        )

    results = anyio.run(run)
    assert [landed[i] for i in range(5)] == results
    assert landed[1].infra_error


class _AsyncFlaky:
    def __init__(self) -> None:
        self.sync = FlakyClient()

    async def exec_once(self, template_id: str, **kw: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: self.sync.exec_once(template_id, **kw))

    async def session_exec(self, session_id: str, **kw: Any) -> Any:  # pragma: no cover
        raise AssertionError("not used")
