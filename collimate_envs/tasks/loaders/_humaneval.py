"""HumanEval rows: the function header and docstring to complete, and a ``check`` function."""

from __future__ import annotations

from collimate_envs.tasks._model import AssertTests, Task
from collimate_envs.tasks.loaders._rows import Row, _get, _task_id

__all__ = ["from_humaneval_row"]


def from_humaneval_row(row: Row, *, source: str = "humaneval", index: int = 0) -> Task:
    """Read a HumanEval row: the prompt is the function header and docstring to complete.

    The reference solution is ``prompt + canonical_solution``; the tests are the row's
    ``check(candidate)`` function, called with the entry point.
    """
    del index
    prompt = _get(row, "prompt", str)
    entry_point = _get(row, "entry_point", str)
    return Task(
        task_id=_task_id(row, "task_id"),
        prompt=prompt,
        tests=AssertTests(code=_get(row, "test", str), check_fn="check"),
        entry_point=entry_point,
        reference_solution=prompt + _get(row, "canonical_solution", str),
        source=source,
        starter_code=prompt,
    )
