"""MultiPL-E rows: a prompt in the row's language to continue, and tests that follow it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collimate_envs.tasks._errors import TaskFormatError
from collimate_envs.tasks._model import Task
from collimate_envs.tasks.loaders._languages import language_name, program_tests

__all__ = ["from_multipl_e_row"]


def from_multipl_e_row(
    row: Mapping[str, Any], *, source: str = "multipl-e", index: int = 0
) -> Task:
    """Read a MultiPL-E row: the prompt is code to continue, the tests follow it.

    >>> t = from_multipl_e_row({"name": "HumanEval_53_add", "language": "rs",
    ...     "prompt": "fn add(x: isize, y: isize) -> isize {\\n", "tests": "}\\nfn main() {}\\n",
    ...     "stop_tokens": ["\\n}"]})
    >>> t.language, t.kind, t.tests.stop_tokens
    ('rust', 'program', ('\\n}',))
    """
    del index
    name, prompt = row.get("name"), row.get("prompt")
    if not isinstance(name, str) or not name:
        raise TaskFormatError("key 'name' must be a non-empty string")
    if not isinstance(prompt, str):
        raise TaskFormatError("key 'prompt' must be a string")
    language = language_name(row.get("language"), "language")
    return Task(
        task_id=name,
        prompt=prompt,
        tests=program_tests(row),
        source=source,
        starter_code=prompt,
        language=language,
    )
