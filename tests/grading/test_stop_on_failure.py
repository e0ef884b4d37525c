"""An all-or-nothing grade ends at its first failing test; a dense one runs them all.

Each candidate fails its first test and would hang on a later one: a test that ran
the later one would record a ``timeout`` (after ``per_test_timeout``), so an outcome
that says "not run" is one the candidate never saw.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from collimate_rl.grading import IOReward, PropertyReward, UnitTestReward, grade
from collimate_rl.grading.specs import RewardSpec
from collimate_rl.node.runtime._sandbox.worker_grade import KNOWN_KEYS

from .conftest import TEMPLATE

HANGS_ON_3 = "def f(x):\n    while x == 3:\n        pass\n    return -x\n"
ASSERTS = "assert f(1) == 1\nassert f(2) == 2\nassert f(3) == 3\n"
RECORDS = [{"input": [x], "expected": x} for x in (1, 2, 3)]
ECHO_THEN_HANG = "n = int(input())\nwhile n == 3:\n    pass\nprint(-n)\n"
CASES = [{"input": f"{x}\n", "output": f"{x}\n"} for x in (1, 2, 3)]


def _not_run(result: Any) -> list[bool]:
    return [not t.ran for t in result.tests]


@pytest.fixture(params=["node", "fake"])
def either(request: pytest.FixtureRequest) -> Any:
    """The real node (its workers grade in-process) and the full harness in a subprocess."""
    return request.getfixturevalue("client" if request.param == "node" else "fake")


@pytest.mark.parametrize(
    ("spec_of", "candidate"),
    [
        (lambda strict: UnitTestReward(ASSERTS, entry="f", **strict), HANGS_ON_3),
        (lambda strict: UnitTestReward(RECORDS, entry="f", **strict), HANGS_ON_3),
        (lambda strict: IOReward(CASES, **strict), ECHO_THEN_HANG),
    ],
    ids=["asserts", "calls", "io"],
)
def test_an_all_or_nothing_grade_runs_nothing_after_a_failure(
    either: Any, spec_of: Any, candidate: str
) -> None:
    strict = spec_of({"all_or_nothing": True, "per_test_timeout": 2.0})
    result = grade(either, TEMPLATE, candidate, strict, extract=False)
    assert (result.reward, result.passed, result.total) == (0.0, 0, 3), result
    assert [t.status for t in result.tests] == ["fail"] * 3
    assert _not_run(result) == [False, True, True]


def test_a_dense_grade_still_runs_every_test(client: Any) -> None:
    dense = UnitTestReward(RECORDS, entry="f", per_test_timeout=1.0)
    result = grade(client, TEMPLATE, HANGS_ON_3, dense, extract=False)
    assert [t.status for t in result.tests] == ["fail", "fail", "timeout"]
    assert not any(_not_run(result))


#: Notes each call in the session's /tmp before it answers, so a test can tell which ran.
COUNTING = (
    "def f(x):\n"
    "    with open('/tmp/calls', 'a') as fh:\n"
    "        fh.write(f'{x} ')\n"
    "    while x == 3:\n"
    "        pass\n"
    "    return -x if x else x\n"
)
#: A bare except around each assert catches the halt.
CATCH_ALL = (
    "for x in (0, 1, 2, 3):\n    try:\n        assert f(x) == x\n    except:\n        pass\n"
)


@pytest.mark.parametrize(
    ("tests", "calls"),
    [(ASSERTS, "1 "), (RECORDS, "1 "), (CATCH_ALL, "0 1 ")],
    ids=["asserts", "calls", "test-code-catches-all"],
)
def test_the_candidate_is_never_called_after_the_failure(
    client: Any, tests: Any, calls: str
) -> None:
    session = client.create_session(TEMPLATE).session_id
    try:
        spec = UnitTestReward(tests, entry="f", all_or_nothing=True, per_test_timeout=2.0)
        result = grade(client, TEMPLATE, COUNTING, spec, session_id=session, extract=False)
        assert result.reward == 0.0 and "timeout" not in {t.status for t in result.tests}
        seen = client.session_exec(session, code="print(open('/tmp/calls').read())")
        assert seen.stdout.strip("\n") == calls
    finally:
        client.delete_session(session)


def test_later_blocks_are_not_run_but_counted(either: Any) -> None:
    blocks = ["assert f(1) == 1", "assert f(3) == 3\nassert f(4) == -4"]
    spec = UnitTestReward(blocks, entry="f", all_or_nothing=True, per_test_timeout=2.0)
    result = grade(either, TEMPLATE, HANGS_ON_3, spec, extract=False)
    assert (result.passed, result.total) == (0, 3)
    assert _not_run(result) == [False, True, True]


def test_the_client_tells_a_test_that_did_not_run() -> None:
    from collimate_rl.grading import _grader
    from collimate_rl.grading.result import NOT_RUN, TestOutcome

    assert _grader.NOT_RUN.startswith(NOT_RUN)  # the harness's words, as the client reads them
    assert not TestOutcome("test 1", "fail", _grader.NOT_RUN).ran
    assert TestOutcome("test 1", "fail", "got 2").ran


def test_a_passing_candidate_runs_every_test(either: Any) -> None:
    spec = UnitTestReward(ASSERTS, entry="f", all_or_nothing=True)
    result = grade(either, TEMPLATE, "def f(x):\n    return x\n", spec, extract=False)
    assert (result.reward, result.passed, result.total) == (1.0, 3, 3)


def test_property_trials_stop_too(client: Any) -> None:
    spec = PropertyReward(
        "def f(x):\n    return x\n",
        "random.randint(0, 3)",
        entry="f",
        k=5,
        all_or_nothing=True,
    )
    result = grade(client, TEMPLATE, "def f(x):\n    return None\n", spec, extract=False)
    assert result.total == 5 and result.passed == 0
    assert _not_run(result) == [False, True, True, True, True]


@pytest.mark.parametrize("all_or_nothing", [False, True])
@pytest.mark.parametrize(
    "spec_of",
    [
        lambda a: UnitTestReward(ASSERTS, entry="f", all_or_nothing=a),
        lambda a: UnitTestReward(RECORDS, entry="f", all_or_nothing=a),
        lambda a: IOReward(CASES, all_or_nothing=a),
        lambda a: PropertyReward("def f(x):\n    return x\n", "1", entry="f", all_or_nothing=a),
    ],
    ids=["asserts", "calls", "io", "property"],
)
def test_a_worker_knows_every_key_a_spec_sends(spec_of: Any, all_or_nothing: bool) -> None:
    # A key the worker does not know sends the grade down the slower exec path.
    spec: RewardSpec = spec_of(all_or_nothing)
    program = spec.build(HANGS_ON_3)
    payload = json.loads(program.files[0]["content"])
    assert set(payload) <= KNOWN_KEYS
    assert ("stop_on_failure" in payload) is all_or_nothing
