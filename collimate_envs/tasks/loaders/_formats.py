"""The format names, their loaders, and telling a row's format from its keys."""

from __future__ import annotations

from typing import Final

from collimate_envs.tasks.loaders._apps import from_apps_row
from collimate_envs.tasks.loaders._codecontests import from_codecontests_row
from collimate_envs.tasks.loaders._collimate import from_collimate_row
from collimate_envs.tasks.loaders._humaneval import from_humaneval_row
from collimate_envs.tasks.loaders._livecodebench import from_livecodebench_row
from collimate_envs.tasks.loaders._mbpp import from_mbpp_row
from collimate_envs.tasks.loaders._multipl_e import from_multipl_e_row
from collimate_envs.tasks.loaders._rows import Row, RowLoader

__all__ = ["FORMATS", "LOADERS", "detect_format"]

#: The loader for each format name.
LOADERS: Final[dict[str, RowLoader]] = {
    "collimate": from_collimate_row,
    "humaneval": from_humaneval_row,
    "mbpp": from_mbpp_row,
    "livecodebench": from_livecodebench_row,
    "apps": from_apps_row,
    "codecontests": from_codecontests_row,
    "multipl_e": from_multipl_e_row,
}
#: The accepted ``format`` values (``"auto"`` detects the format from the first row).
FORMATS: Final = ("auto", *LOADERS)

_SIGNATURES: Final = (
    ("collimate", frozenset({"task_id", "prompt", "tests"})),
    ("humaneval", frozenset({"task_id", "prompt", "canonical_solution", "test", "entry_point"})),
    ("mbpp", frozenset({"text", "code", "test_list"})),
    ("livecodebench", frozenset({"question_content"})),
    ("livecodebench", frozenset({"reward_spec"})),
    ("apps", frozenset({"question", "input_output"})),
    ("codecontests", frozenset({"name", "description", "public_tests"})),
    ("multipl_e", frozenset({"name", "language", "prompt", "tests"})),
)


def detect_format(row: Row) -> str | None:
    """The format a row looks like, judged by its keys, or ``None``.

    >>> detect_format({"text": "...", "code": "...", "test_list": []})
    'mbpp'
    >>> detect_format({"foo": 1}) is None
    True
    """
    keys = set(row)
    for name, required in _SIGNATURES:
        if required <= keys:
            return name
    return None
