"""Loaders, format detection, file reading and the error paths (fixtures are original rows)."""

from __future__ import annotations

import base64
import gzip
import json
import pickle
import shutil
import zlib
from pathlib import Path
from typing import Any

import _tasks_checker as checker
import pytest

from collimate_envs.tasks import (
    AssertTests,
    FunctionCallTests,
    IOTests,
    PropertyTests,
    TaskFormatError,
    UnitTests,
    detect_format,
    load_task_set,
    read_task_file,
)
from collimate_envs.tasks.loaders import (
    from_apps_row,
    from_collimate_row,
    from_livecodebench_row,
    from_mbpp_row,
    to_collimate_row,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> Path:
    return FIXTURES / name


def _first_row(name: str) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(_fixture(name).read_text().splitlines()[0])
    return row


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# detection and each format


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("humaneval_tiny.jsonl", "humaneval"),
        ("mbpp_tiny.jsonl", "mbpp"),
        ("livecodebench_tiny.jsonl", "livecodebench"),
        ("skyrl_lcb_tiny.jsonl", "livecodebench"),
        ("apps_tiny.jsonl", "apps"),
        ("collimate_tiny.jsonl", "collimate"),
    ],
)
def test_detect_format_and_auto_equals_explicit(fixture: str, expected: str) -> None:
    assert detect_format(_first_row(fixture)) == expected
    auto = load_task_set(_fixture(fixture))
    explicit = load_task_set(str(_fixture(fixture)), format=expected)
    assert [to_collimate_row(t) for t in auto] == [to_collimate_row(t) for t in explicit]
    assert auto.name == fixture.removesuffix(".jsonl")


def test_humaneval_rows() -> None:
    tasks = load_task_set(_fixture("humaneval_tiny.jsonl"))
    assert tasks.ids == ("Tiny/0", "Tiny/1")
    task = tasks["Tiny/0"]
    assert isinstance(task.tests, AssertTests)
    assert task.tests.check_fn == "check"
    assert task.entry_point == "triple"
    assert task.prompt.startswith("def triple(x: int) -> int:")
    assert task.starter_code == task.prompt
    assert task.reference_solution is not None
    assert task.reference_solution.endswith("    return 3 * x\n")
    assert task.difficulty is None
    assert task.tests.script("triple").rstrip().endswith("check(triple)")


def test_mbpp_rows() -> None:
    tasks = load_task_set(_fixture("mbpp_tiny.jsonl"))
    first, second = tasks
    assert (first.task_id, first.entry_point) == ("901", "last_digit")
    assert "\r" not in (first.reference_solution or "")
    assert "assert last_digit(123) == 3" in first.prompt
    assert isinstance(second.tests, AssertTests)
    assert second.tests.code.startswith("DATA = [1, 2, 3, 4]\n")
    assert "challenge" not in second.tests.code and "[5], 5" not in second.tests.code


def test_mbpp_test_imports() -> None:
    row = {
        "task_id": 3,
        "text": "Square root, floored.",
        "code": "import math\ndef isqrt(n):\n    return math.isqrt(n)",
        "test_list": ["assert isqrt(10) == math.floor(math.sqrt(10))"],
        "test_imports": ["import math"],
    }
    task = from_mbpp_row(row)
    assert isinstance(task.tests, AssertTests)
    assert task.tests.code.startswith("import math\nassert isqrt(10)")
    assert checker.run(task, task.reference_solution or "").passed


def test_livecodebench_rows() -> None:
    stdin_task, call_task = load_task_set(_fixture("livecodebench_tiny.jsonl"))
    assert stdin_task.task_id == "lcb-tiny-1"
    assert stdin_task.difficulty == "easy"
    assert isinstance(stdin_task.tests, IOTests)
    assert len(stdin_task.tests.cases) == 3  # public + private
    assert stdin_task.entry_point is None
    assert "standard input" in stdin_task.prompt
    assert stdin_task.prompt.startswith("Sum of a list\n\n")

    assert isinstance(call_task.tests, FunctionCallTests)
    assert call_task.entry_point == call_task.tests.fn_name == "shiftAll"
    assert call_task.tests.cases == (((([1, 2, 3]), 2), [3, 4, 5]), (([], 5), []))
    assert call_task.starter_code is not None and "class Solution" in call_task.prompt
    solution = (
        "class Solution:\n    def shiftAll(self, nums, k):\n        return [x + k for x in nums]\n"
    )
    assert checker.run(call_task, solution).passed
    assert not checker.run(call_task, solution.replace("x + k", "x")).passed


def test_livecodebench_compressed_private_cases() -> None:
    private = json.dumps([{"input": "5\n", "output": "25\n", "testtype": "stdin"}])
    packed = base64.b64encode(zlib.compress(pickle.dumps(private))).decode()
    row = {
        "question_id": "z1",
        "question_content": "Square it.",
        "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
        "private_test_cases": packed,
        "metadata": "{}",
    }
    task = from_livecodebench_row(row)
    assert isinstance(task.tests, IOTests)
    assert task.tests.cases == (("2\n", "4\n"), ("5\n", "25\n"))


def test_livecodebench_refuses_pickled_objects() -> None:
    class Boom:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (print, ("unpickled!",))

    packed = base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()
    row = {"question_id": "evil", "question_content": "x", "private_test_cases": packed}
    with pytest.raises(TaskFormatError, match="refusing to unpickle"):
        from_livecodebench_row(row)


def test_skyrl_lcb_rows() -> None:
    square, flip = load_task_set(_fixture("skyrl_lcb_tiny.jsonl"))
    assert square.task_id == "sq-0"
    assert square.prompt == "Read an integer and print its square."  # user turns only
    assert isinstance(square.tests, IOTests)
    assert checker.run(square, "n = int(input())\nprint(n * n)\n").passed
    assert isinstance(flip.tests, FunctionCallTests)
    assert flip.tests.fn_name == "flip"
    assert flip.tests.cases == ((("abc",), "cba"),)
    assert checker.run(flip, "def flip(s):\n    return s[::-1]\n").passed


def test_apps_rows() -> None:
    stdin_task, call_task = load_task_set(_fixture("apps_tiny.jsonl"))
    assert (stdin_task.task_id, stdin_task.difficulty) == ("7001", "easy")
    assert isinstance(stdin_task.tests, IOTests)
    assert call_task.difficulty == "hard"
    assert isinstance(call_task.tests, FunctionCallTests)
    assert call_task.tests.accept_wrapped
    assert call_task.tests.cases == ((("hello",), [4]), (("",), [0]))
    assert call_task.starter_code == "def distinct_chars(s):\n"


@pytest.mark.parametrize(
    "fixture",
    ["humaneval_tiny.jsonl", "mbpp_tiny.jsonl", "apps_tiny.jsonl", "collimate_tiny.jsonl"],
)
def test_fixture_references_pass_and_wrong_ones_fail(fixture: str) -> None:
    for task in load_task_set(_fixture(fixture)):
        assert task.reference_solution is not None
        outcome = checker.run(task, task.reference_solution)
        assert outcome.passed, (task.task_id, outcome.failures)
        if task.wrong_solution is not None:
            assert not checker.run(task, task.wrong_solution).passed, task.task_id


def test_collimate_format_covers_every_kind_and_round_trips() -> None:
    tasks = load_task_set(_fixture("collimate_tiny.jsonl"))
    kinds = {t.task_id: type(t.tests) for t in tasks}
    assert kinds == {
        "tiny/unit": UnitTests,
        "tiny/property": PropertyTests,
        "tiny/io": IOTests,
        "tiny/assert": AssertTests,
        "tiny/call": FunctionCallTests,
    }
    for task in tasks:
        again = from_collimate_row(to_collimate_row(task), source=task.source)
        assert again == task


def test_bundled_rows_round_trip() -> None:
    lines = (
        Path(__file__).resolve().parents[3] / "collimate_envs/tasks/data/collimate_basic.jsonl"
    ).read_text(encoding="utf-8")
    for line, task in zip(lines.splitlines(), load_task_set("collimate-basic"), strict=True):
        assert to_collimate_row(task) == json.loads(line)


def test_gzip_files(tmp_path: Path) -> None:
    packed = tmp_path / "apps_tiny.jsonl.gz"
    with gzip.open(packed, "wb") as fh:
        fh.write(_fixture("apps_tiny.jsonl").read_bytes())
    tasks = load_task_set(packed)
    assert tasks.name == "apps_tiny"
    plain = load_task_set(_fixture("apps_tiny.jsonl"))
    assert [to_collimate_row(t) for t in tasks] == [to_collimate_row(t) for t in plain]


def test_apps_outputs_as_line_lists() -> None:
    row = {
        "problem_id": 1,
        "question": "q",
        "input_output": json.dumps({"inputs": [["1", "2"]], "outputs": [["3"]]}),
    }
    task = from_apps_row(row)
    assert isinstance(task.tests, IOTests)
    assert task.tests.cases == (("1\n2\n", "3\n"),)
    assert task.reference_solution is None


# --------------------------------------------------------------------------------------------
# malformed files

GOOD_HE = _fixture("humaneval_tiny.jsonl").read_text().splitlines()[0]


@pytest.mark.parametrize(
    ("lines", "fmt", "line", "match"),
    [
        ([GOOD_HE, "{not json"], "auto", 2, "invalid JSON"),
        ([GOOD_HE, "[1, 2]"], "auto", 2, "must be a JSON object"),
        (["", GOOD_HE, json.dumps({"task_id": "x", "prompt": "p"})], "auto", 3, "missing key"),
        ([json.dumps({"foo": 1})], "auto", 1, "cannot detect the task format"),
        (
            [GOOD_HE.replace('"entry_point": "triple"', '"entry_point": 3')],
            "humaneval",
            1,
            "'entry_point' must be str",
        ),
        ([GOOD_HE, GOOD_HE], "auto", 2, "duplicate task_id 'Tiny/0'"),
        (
            [json.dumps({"task_id": "a", "prompt": "p", "tests": {"kind": "fuzz"}})],
            "collimate",
            1,
            "unknown tests.kind 'fuzz'",
        ),
        (
            [
                json.dumps(
                    {
                        "task_id": "a",
                        "prompt": "p",
                        "entry_point": "f",
                        "tests": {"kind": "unit", "cases": [{"args": [1]}]},
                    }
                )
            ],
            "collimate",
            1,
            r"cases\[0\] must be an object with 'args', 'expected'",
        ),
        (
            [
                json.dumps(
                    {
                        "task_id": "a",
                        "prompt": "p",
                        "entry_point": "f",
                        "reference_solution": "def f(x): return x",
                        "tests": {"kind": "property", "generator": "(1,"},
                    }
                )
            ],
            "collimate",
            1,
            "generator is not an expression",
        ),
        (
            [
                json.dumps(
                    {
                        "task_id": "a",
                        "prompt": "p",
                        "tests": {"kind": "unit", "cases": [{"args": [1], "expected": 1}]},
                    }
                )
            ],
            "collimate",
            1,
            "unit tests need an entry_point",
        ),
        (
            [
                json.dumps(
                    {"task_id": 1, "text": "t", "code": "def f(): pass", "test_list": "assert f()"}
                )
            ],
            "auto",
            1,
            "'test_list' must be list",
        ),
        (
            [json.dumps({"question_content": "q", "public_test_cases": "[{bad"})],
            "livecodebench",
            1,
            "neither JSON nor LiveCodeBench's compressed encoding",
        ),
        (
            [
                json.dumps(
                    {
                        "problem_id": 1,
                        "question": "q",
                        "input_output": json.dumps({"inputs": ["1"], "outputs": []}),
                    }
                )
            ],
            "apps",
            1,
            "1 inputs but 0 outputs",
        ),
        (
            [
                json.dumps(
                    {
                        "question_content": "q",
                        "public_test_cases": json.dumps(
                            [{"input": "1", "output": "1", "testtype": "functional"}]
                        ),
                    }
                )
            ],
            "livecodebench",
            1,
            "func_name",
        ),
    ],
)
def test_malformed_rows_name_file_and_line(
    tmp_path: Path, lines: list[str], fmt: str, line: int, match: str
) -> None:
    path = _write(tmp_path, "bad.jsonl", lines)
    with pytest.raises(TaskFormatError, match=match) as info:
        read_task_file(path, format=fmt)
    assert info.value.line == line
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_empty_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "empty.jsonl", ["", "   "])
    with pytest.raises(TaskFormatError, match="holds no tasks"):
        load_task_set(path)


def test_unsupported_suffix(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    shutil.copy(_fixture("apps_tiny.jsonl"), path)
    with pytest.raises(TaskFormatError, match=r"\.jsonl or \.jsonl\.gz"):
        load_task_set(path)


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl.gz"
    path.write_bytes(b"this is not gzip")
    with pytest.raises(TaskFormatError, match="cannot read the file") as info:
        load_task_set(path)
    assert info.value.path == str(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"task_id": "\xff"}\n')
    with pytest.raises(TaskFormatError, match="not UTF-8"):
        load_task_set(path)


def test_missing_file_and_bad_format(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_task_set(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="unknown format 'csv'"):
        load_task_set(_fixture("apps_tiny.jsonl"), format="csv")
    with pytest.raises(ValueError, match="applies to files"):
        load_task_set("collimate-basic", format="mbpp")


def test_wrong_explicit_format_is_reported(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="not a valid mbpp row: missing key 'test_list'"):
        load_task_set(_fixture("humaneval_tiny.jsonl"), format="mbpp")
