"""Starter code (HumanEval's prompt): a body continues it, a whole function keeps its helpers."""

from __future__ import annotations

from typing import Any

import pytest

from collimate_rl.grading import UnitTestReward, grade, spec_from_dict
from collimate_rl.grading._starter import join_starter, starter_helpers

from .conftest import TEMPLATE

STARTER = (
    "import math\n\nSCALE = 2\n\n\ndef helper(x):\n    return x * SCALE\n\n\n"
    'def entry(x):\n    """Twice the square root, scaled."""\n'
)
TESTS = "def check(candidate):\n    assert candidate(16) == 8.0\n    assert helper(1) == 2\n\ncheck(entry)\n"


def test_starter_helpers_drop_only_the_entry_stub() -> None:
    assert starter_helpers(STARTER, "entry") == (
        "import math\n\nSCALE = 2\n\n\ndef helper(x):\n    return x * SCALE"
    )
    decorated = "import functools\n\n@functools.cache\ndef entry(n):\n    pass\n"
    assert starter_helpers(decorated, "entry") == "import functools"
    method = "class Solution:\n    def entry(self, x):\n        pass\n"
    assert starter_helpers(method, "entry") == ""
    assert starter_helpers("def entry(x):\n", "entry") == ""  # a bare header
    assert starter_helpers("this is not (python", "entry") == ""


@pytest.mark.parametrize(
    ("candidate", "expected_tail"),
    [
        ("    return helper(math.sqrt(x))\n", "    return helper(math.sqrt(x))\n"),
        ("return helper(math.sqrt(x))", "    return helper(math.sqrt(x))"),
        ("r = math.sqrt(x)\nreturn helper(r)", "    r = math.sqrt(x)\n    return helper(r)"),
        ("", ""),
    ],
    ids=["body", "dedented-body", "dedented-two-lines", "nothing"],
)
def test_a_body_continues_the_starter(candidate: str, expected_tail: str) -> None:
    joined = join_starter(STARTER, candidate, "entry")
    assert joined.source == STARTER + expected_tail
    assert joined.prelude == ""
    assert joined.helpers == starter_helpers(STARTER, "entry")


def test_a_body_followed_by_top_level_helpers_continues_as_written() -> None:
    candidate = "    return other(x)\n\ndef other(x):\n    return x"
    assert join_starter(STARTER, candidate, "entry").source == STARTER + candidate


def test_a_whole_function_runs_as_written_after_the_helpers() -> None:
    candidate = "def entry(x):\n    return helper(math.sqrt(x))"
    joined = join_starter(STARTER, candidate, "entry")
    assert joined.source == candidate
    assert joined.prelude == starter_helpers(STARTER, "entry")


def test_a_starter_without_newline_and_a_bare_header() -> None:
    assert join_starter("def entry(x):", "return x", "entry").source == (
        "def entry(x):\n    return x"
    )


GRADES = {
    "body": ("    return helper(math.sqrt(x))\n", 1.0),
    "dedented-body": ("return helper(math.sqrt(x))", 1.0),
    "whole-function": ("def entry(x):\n    return helper(math.sqrt(x))\n", 1.0),
    "chat": ("Sure.\n```python\ndef entry(x):\n    return 2 * math.sqrt(x)\n```\nDone.", 1.0),
    "redefined-helper-wins-in-the-candidate": (
        "def helper(x):\n    return x * 4\n\ndef entry(x):\n    return helper(math.sqrt(x)) / 2",
        1.0,
    ),
    "wrong-body": ("    return None\n", 0.0),
    "prose-only": ("I cannot do this.", 0.0),
    "syntax-error-in-the-body": ("    return (x +\n", 0.0),
}


@pytest.mark.parametrize(("completion", "reward"), GRADES.values(), ids=GRADES)
def test_grades_under_starter_code(fake: Any, completion: str, reward: float) -> None:
    spec = UnitTestReward(TESTS, entry="entry", starter_code=STARTER, all_or_nothing=True)
    result = grade(fake, TEMPLATE, completion, spec)
    assert result.reward == reward, result


def test_a_forged_helper_never_reaches_the_tests(fake: Any) -> None:
    # The tests call helper(): the starter's copy, run in the trusted harness.
    forged = "def helper(x):\n    return 'forged'\n\ndef entry(x):\n    return 8.0"
    spec = UnitTestReward(TESTS, entry="entry", starter_code=STARTER)
    result = grade(fake, TEMPLATE, forged, spec)
    assert (result.passed, result.total) == (2, 2)
    spoof = UnitTestReward(
        "assert helper(1) == 'forged'", entry="entry", starter_code=STARTER, all_or_nothing=True
    )
    assert grade(fake, TEMPLATE, forged, spoof).reward == 0.0


def test_the_user_prelude_still_runs_first(fake: Any) -> None:
    spec = UnitTestReward(
        "assert entry(1) == 7", entry="entry", prelude="BASE = 5", starter_code=STARTER
    )
    assert grade(fake, TEMPLATE, "    return BASE + helper(x)\n", spec).reward == 1.0


def test_starter_code_round_trips_through_the_manifest_form() -> None:
    spec = UnitTestReward(TESTS, entry="entry", starter_code=STARTER)
    assert spec_from_dict(spec.to_dict()) == spec
