"""Fuzzing the row loaders: malformed rows raise TaskFormatError, never anything else."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_envs.tasks import Task, TaskFormatError
from collimate_envs.tasks.loaders import LOADERS

KEYS = sorted(
    {
        "task_id",
        "prompt",
        "tests",
        "entry_point",
        "difficulty",
        "reference_solution",
        "wrong_solution",
        "tags",
        "starter_code",
        "canonical_solution",
        "test",
        "text",
        "code",
        "test_list",
        "test_setup_code",
        "test_imports",
        "question_content",
        "question_title",
        "question_id",
        "public_test_cases",
        "private_test_cases",
        "metadata",
        "reward_spec",
        "extra_info",
        "problem_id",
        "question",
        "solutions",
        "input_output",
        "kind",
        "cases",
        "args",
        "expected",
        "stdin",
        "stdout",
        "generator",
        "k",
        "seed",
        "fn_name",
        "check_fn",
        "input",
        "output",
        "testtype",
        "func_name",
        "ground_truth",
        "inputs",
        "outputs",
    }
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "x", "f", "unit", "io", "property", "stdin", "functional", "1\n2", "[1]"]),
)


def _values(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=5),
    )


VALUES = st.recursive(SCALARS, _values, max_leaves=12)
JSON_TEXT = VALUES.map(json.dumps)
ROWS = st.dictionaries(st.sampled_from(KEYS), st.one_of(VALUES, JSON_TEXT), max_size=8)


@settings(max_examples=300, deadline=None)
@given(row=ROWS, fmt=st.sampled_from(sorted(LOADERS)))
def test_loaders_raise_only_task_format_errors(row: dict[str, Any], fmt: str) -> None:
    try:
        task = LOADERS[fmt](row, source="fuzz", index=0)
    except TaskFormatError:
        return
    assert isinstance(task, Task)


FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = [
    (name.removesuffix("_tiny.jsonl"), json.loads(line))
    for name in sorted(p.name for p in FIXTURES.glob("*.jsonl"))
    for line in (FIXTURES / name).read_text().splitlines()
]
FORMAT_OF = {
    "apps": "apps",
    "collimate": "collimate",
    "humaneval": "humaneval",
    "livecodebench": "livecodebench",
    "mbpp": "mbpp",
    "skyrl_lcb": "livecodebench",
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a row, decoding JSON-text fields on the way."""
    out = [prefix] if prefix else []
    if isinstance(value, str) and value[:1] in "[{":
        try:
            value = json.loads(value)
        except ValueError:
            return out
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _paths(child, (*prefix, i))
    return out


def _mutate(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    encoded = isinstance(value, str)
    data = json.loads(value) if encoded else value
    data = copy.deepcopy(data)
    head, rest = path[0], path[1:]
    if rest:
        data[head] = _mutate(data[head], rest, new, delete)
    elif delete and isinstance(data, dict):
        del data[head]
    else:
        data[head] = new
    return json.dumps(data) if encoded else data


@st.composite
def _mutants(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name, row = draw(st.sampled_from(SEEDS))
    path = draw(st.sampled_from(_paths(row)))
    mutant = _mutate(row, path, draw(st.one_of(VALUES, JSON_TEXT)), draw(st.booleans()))
    return FORMAT_OF[name], mutant


@settings(max_examples=int(os.environ.get("TASKS_FUZZ_EXAMPLES", "500")), deadline=None)
@given(case=_mutants())
def test_mutated_rows_raise_only_task_format_errors(case: tuple[str, dict[str, Any]]) -> None:
    fmt, row = case
    try:
        task = LOADERS[fmt](row, source="fuzz", index=0)
    except TaskFormatError:
        return
    assert isinstance(task, Task)
