"""Every spec on correct, wrong, crashing, hanging and partially correct candidates (real node)."""

from __future__ import annotations

from typing import Any

import pytest

from collimate_rl.grading import (
    CustomReward,
    FunctionCallReward,
    IOReward,
    PropertyReward,
    RewardSpec,
    UnitTestReward,
    grade,
)

from .conftest import TEMPLATE

T = 1.0  # per-test timeout for these specs: hanging candidates cost ~1 s

ADD_RECORDS = UnitTestReward(
    [{"input": [1, 2], "expected": 3}, {"input": [5, 5], "expected": 10}],
    entry="add",
    per_test_timeout=T,
)
ADD_ASSERTS = UnitTestReward(
    ["assert add(1, 2) == 3", "assert add(5, 5) == 10"], entry="add", per_test_timeout=T
)
ADD_CHECK = UnitTestReward(
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n\ncheck(add)\n",
    entry="add",
    per_test_timeout=T,
)
ADD_PROPERTY = PropertyReward(
    "return x[0] + x[1]",
    "(random.randint(0, 9), random.randint(10, 19))",
    k=4,
    entry="add",
    per_test_timeout=T,
)
ADD_FUNCTIONAL = FunctionCallReward(
    "add", [{"input": "1\n2", "output": "3"}, {"input": "5\n5", "output": "10"}], per_test_timeout=T
)
ADD_CUSTOM = CustomReward(
    "def grade(api):\n"
    "    ok = 0\n"
    "    for a, b in [(1, 2), (5, 5)]:\n"
    "        try:\n"
    "            ok += api.call('add', a, b) == a + b\n"
    "        except Exception:\n"
    "            pass\n"
    "    return ok, 2\n",
    entry="add",
    per_test_timeout=T,
)

# add(a, b) as a function. The property spec calls add(x) with x = (a, b).
FUNCTION_CANDIDATES = {
    "correct": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a - b - 100\n",
    "crashing": "def add(a, b):\n    raise RuntimeError('boom')\n",
    "hanging": "def add(a, b):\n    while True:\n        pass\n",
    "partial": "def add(a, b):\n    return a + b if a < 3 else 0\n",
}
PROPERTY_CANDIDATES = {
    "correct": "def add(x):\n    return x[0] + x[1]\n",
    "wrong": "def add(x):\n    return -1\n",
    "crashing": "import os\ndef add(x):\n    os._exit(3)\n",
    "hanging": "import time\ndef add(x):\n    time.sleep(60)\n",
    "partial": "def add(x):\n    return x[0] + x[1] if x[0] % 2 == 0 else 0\n",
}
IO_SPEC = IOReward(
    [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}], per_test_timeout=T
)
IO_CANDIDATES = {
    "correct": "a, b = map(int, input().split())\nprint(a + b)\n",
    "wrong": "print(42)\n",
    "crashing": "raise SystemExit('bad input')\nprint(3)\n",
    "hanging": "import sys\nsys.stdin.read()\nwhile True:\n    pass\n",
    "partial": "a, b = map(int, input().split())\nprint(a + b if a < 3 else 0)\n",
}

EXPECTED = {"correct": 1.0, "wrong": 0.0, "crashing": 0.0, "hanging": 0.0}

CASES: list[tuple[str, RewardSpec, dict[str, str]]] = [
    ("records", ADD_RECORDS, FUNCTION_CANDIDATES),
    ("asserts", ADD_ASSERTS, FUNCTION_CANDIDATES),
    ("humaneval-check", ADD_CHECK, FUNCTION_CANDIDATES),
    ("property", ADD_PROPERTY, PROPERTY_CANDIDATES),
    ("functional", ADD_FUNCTIONAL, FUNCTION_CANDIDATES),
    ("custom", ADD_CUSTOM, FUNCTION_CANDIDATES),
    ("io", IO_SPEC, IO_CANDIDATES),
]


@pytest.mark.parametrize("behaviour", ["correct", "wrong", "crashing", "hanging", "partial"])
@pytest.mark.parametrize(("name", "spec", "candidates"), CASES, ids=[c[0] for c in CASES])
def test_spec_on_candidate(
    client: Any, name: str, spec: RewardSpec, candidates: dict[str, str], behaviour: str
) -> None:
    completion = f"Here you go:\n```python\n{candidates[behaviour]}```\n"
    seed = "ab" * 32  # property: inputs (a<10 even/odd mix) are fixed by the seed
    result = grade(client, TEMPLATE, completion, spec, seed=seed, timeout_seconds=20)
    assert not result.infra_error
    assert result.exit_code == 0, result
    assert result.seed == seed
    if behaviour == "partial":
        assert 0.0 < result.reward < 1.0, result
        assert 0 < result.passed < result.total
    else:
        assert result.reward == EXPECTED[behaviour], result
    if behaviour == "correct":
        assert result.ok and all(t.status == "pass" for t in result.tests)
    if behaviour == "hanging" and name != "custom":
        assert {t.status for t in result.tests} == {"timeout"}
    if behaviour == "crashing" and name in ("records", "functional"):
        assert {t.status for t in result.tests} == {"error"}
        assert "boom" in result.tests[0].detail
        assert "RuntimeError" in result.output_tail  # the traceback is feedback


def test_all_or_nothing(client: Any) -> None:
    partial = FUNCTION_CANDIDATES["partial"]
    fraction = grade(client, TEMPLATE, partial, ADD_RECORDS, extract=False)
    strict = UnitTestReward(ADD_RECORDS.tests, entry="add", all_or_nothing=True)
    binary = grade(client, TEMPLATE, partial, strict, extract=False)
    assert fraction.reward == 0.5 and binary.reward == 0.0
    assert binary.passed == 1 and binary.total == 2


def test_syntax_error_is_a_task_failure(client: Any) -> None:
    result = grade(client, TEMPLATE, "def add(a, b) return", ADD_RECORDS, extract=False)
    assert result.reward == 0.0 and not result.infra_error and result.total == 2
    assert "SyntaxError" in result.tests[0].detail


def test_exec_timeout_without_verdict_is_a_task_failure(client: Any) -> None:
    # The per-test timeout is longer than the exec: the node kills the harness,
    # there is no verdict, and that is a task failure with the exit code recorded.
    spec = UnitTestReward([{"input": [1, 2], "expected": 3}], entry="add", per_test_timeout=30)
    hang = "import time\ndef add(a, b):\n    time.sleep(60)\n"
    result = grade(client, TEMPLATE, hang, spec, timeout_seconds=2, extract=False)
    assert result.reward == 0.0 and not result.infra_error
    if result.exit_code == -1:
        assert result.error and "timed out" in result.error
    else:  # the harness's own budget fired first
        assert result.tests[0].status == "timeout"


def test_big_int_answers(client: Any) -> None:
    spec = UnitTestReward([{"input": [3000], "expected": 2**3000 * 3**3000}], entry="f")
    result = grade(client, TEMPLATE, "def f(n):\n    return 6 ** n\n", spec, extract=False)
    assert result.reward == 1.0, result


def test_the_unisolated_none_driver_grades_the_same() -> None:
    from collimate_rl.node import LocalNode

    with LocalNode(isolation="none") as node:
        none_client = node.client()
        for spec, candidates in ((ADD_RECORDS, FUNCTION_CANDIDATES), (IO_SPEC, IO_CANDIDATES)):
            for behaviour in ("correct", "wrong", "partial"):
                result = grade(none_client, TEMPLATE, candidates[behaviour], spec, extract=False)
                assert result.reward == {"correct": 1.0, "wrong": 0.0, "partial": 0.5}[behaviour]
