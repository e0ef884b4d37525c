"""The harness: comparison rules, assert accounting, and how T reads its candidates.

Mostly against a plain subprocess (no sandbox); where T's reading of a box matters, against
the node too.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collimate_rl.grading import CustomReward, IOReward, UnitTestReward, grade
from collimate_rl.grading._compare import _io_same, same

from .conftest import TEMPLATE


@pytest.mark.parametrize(
    ("got", "want", "kwargs", "equal"),
    [
        (True, 1, {}, False),
        (1, True, {}, False),
        (1, 1.0, {}, True),
        (0.1 + 0.2, 0.3, {}, False),
        (0.1 + 0.2, 0.3, {"tol": 1e-9}, True),
        (math.nan, math.nan, {}, True),
        ((1, 2), [1, 2], {}, False),
        ((1, 2), [1, 2], {"loose": True}, True),
        ({"a": [1, (2,)]}, {"a": [1, (2,)]}, {}, True),
        ({"a": 1}, {"a": 1, "b": 2}, {}, False),
        ({1, 2}, frozenset({1, 2}), {}, True),
        (b"x", "x", {}, False),
        (None, 0, {}, False),
        (1 + 2j, 1 + 2.0000000001j, {"tol": 1e-6}, True),
        ([1, [True]], [1, [1]], {}, False),
    ],
)
def test_same(got: Any, want: Any, kwargs: dict[str, Any], equal: bool) -> None:
    assert same(got, want, **kwargs) is equal


@pytest.mark.parametrize(
    ("got", "want", "strip", "tol", "equal"),
    [
        ("3\n", "3", True, None, True),
        ("  1 2 \n\n", "1 2", True, None, True),
        ("1  2", "1 2", True, None, False),
        ("3\n", "3", False, None, False),
        ("0.3333333\n", "0.33333333", True, 1e-6, True),
        ("1.0", "1", True, 0.0, True),
        ("1.0", "1", True, None, False),
        ("abc 1.0", "abd 1.0", True, 1e-6, False),
        ("1\n2", "1", True, None, False),
    ],
)
def test_io_same(got: str, want: str, strip: bool, tol: float | None, equal: bool) -> None:
    assert _io_same(got, want, strip=strip, tol=tol) is equal


def test_every_assert_counts_and_loops_count_each_pass(fake: Any) -> None:
    tests = (
        "def check(candidate):\n"
        "    for i in range(5):\n"
        "        assert candidate(i) == i * i\n"
        "    assert candidate(10) == 100\n"
        "check(sq)\n"
    )
    spec = UnitTestReward(tests, entry="sq")
    half = grade(
        fake, TEMPLATE, "def sq(x):\n    return x * x if x < 3 else 0\n", spec, extract=False
    )
    assert (half.passed, half.total) == (3, 6)


def test_an_error_outside_an_assert_voids_the_block(fake: Any) -> None:
    # The candidate passes two asserts, then crashes on a line that is not an
    # assert: the rest of the block never runs, so nothing in it counts.
    tests = (
        "assert sq(1) == 1\n"
        "assert sq(2) == 4\n"
        "value = sq(3)\n"
        "for i in range(10):\n"
        "    assert value + i == 9 + i\n"
    )
    crash = "def sq(x):\n    if x == 3:\n        raise ValueError\n    return x * x\n"
    result = grade(fake, TEMPLATE, crash, UnitTestReward(tests, entry="sq"), extract=False)
    assert result.passed == 0 and result.total == 3 and result.reward == 0.0
    honest = grade(
        fake,
        TEMPLATE,
        "def sq(x):\n    return x * x\n",
        UnitTestReward(tests, entry="sq"),
        extract=False,
    )
    assert (honest.passed, honest.total) == (12, 12)


def test_expected_exceptions_and_helper_names(fake: Any) -> None:
    tests = [
        "try:\n    div(1, 0)\n    assert False\nexcept ZeroDivisionError:\n    pass",
        "assert Helper_twice(3) == 6",
        "assert div(6, 3) == 2",
    ]
    code = "def Helper_twice(x):\n    return 2 * x\ndef div(a, b):\n    return a / b\n"
    result = grade(fake, TEMPLATE, code, UnitTestReward(tests, entry="div"), extract=False)
    assert result.reward == 1.0, result


def test_io_reads_all_stdin_and_large_outputs(fake: Any) -> None:
    numbers = " ".join(str(i) for i in range(200_000))
    spec = IOReward([{"input": numbers + "\n", "output": str(sum(range(200_000)))}])
    code = "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))\n"
    assert grade(fake, TEMPLATE, code, spec, extract=False).reward == 1.0
    echo = IOReward([{"input": numbers, "output": numbers}])
    assert grade(fake, TEMPLATE, "print(input())", echo, extract=False).reward == 1.0


def test_custom_grader_api(fake: Any) -> None:
    script = (
        "def grade(api):\n"
        "    out, code = api.run_program('2\\n')\n"
        "    api.record('program', out.strip() == '4')\n"
        "    api.record('call', api.call('sq', 5) == 25)\n"
        "    try:\n"
        "        api.call('sq', 'x')\n"
        "    except TypeError:\n"
        "        api.record('raises', True)\n"
        "    return 3, 3\n"
    )
    code = "def sq(x):\n    return x * x\nif __name__ == '__main__':\n    print(sq(int(input())))\n"
    result = grade(fake, TEMPLATE, code, CustomReward(script, entry="sq"), extract=False)
    assert result.reward == 1.0 and [t.name for t in result.tests] == ["program", "call", "raises"]
    broken = grade(
        fake, TEMPLATE, code, CustomReward("def grade(api):\n    1 / 0\n"), extract=False
    )
    assert broken.reward == 0.0 and broken.error and "ZeroDivisionError" in broken.error


def test_in_place_mutations_reach_assert_style_tests(fake: Any) -> None:
    tests = [
        "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]",
        "d = {}\nfill(d)\nassert d == {'k': [1]}",
    ]
    code = "def sort_in_place(xs):\n    xs.sort()\ndef fill(d):\n    d['k'] = [1]\n"
    result = grade(
        fake, TEMPLATE, code, UnitTestReward(tests, entry="sort_in_place"), extract=False
    )
    assert result.reward == 1.0, result


@pytest.mark.parametrize("backend", ["fake", "client"])
def test_output_is_whole_at_every_pipe_boundary(backend: str, request: Any) -> None:
    # T reads a candidate's output only when select says a pipe is readable and stops
    # at a short read: outputs around a pipe's 64 KiB capacity must still arrive whole.
    runner = request.getfixturevalue(backend)
    sizes = (1, 4095, 65535, 65536, 65537, 131072, 200_003)
    cases = [{"input": str(n), "output": "x" * n} for n in sizes]
    code = "import sys\nsys.stdout.write('x' * int(input()))\n"
    result = grade(runner, TEMPLATE, code, IOReward(cases, strip_whitespace=False), extract=False)
    assert result.reward == 1.0, result


@pytest.mark.parametrize("calls", [1, 3])
@pytest.mark.parametrize("backend", ["fake", "client"])
def test_the_tail_holds_what_a_call_printed_before_answering(
    backend: str, calls: int, request: Any
) -> None:
    runner = request.getfixturevalue(backend)
    code = (
        "import sys\n"
        "def f(x):\n"
        "    print('filler ' * 3000)\n"
        "    print(f'out-{x}')\n"
        "    print(f'err-{x}', file=sys.stderr)\n"
        "    return x\n"
    )
    spec = UnitTestReward([{"input": [i], "expected": i} for i in range(calls)], entry="f")
    result = grade(runner, TEMPLATE, code, spec, extract=False)
    assert result.reward == 1.0, result
    last = calls - 1
    assert f"out-{last}" in result.output_tail and f"err-{last}" in result.output_tail


@pytest.mark.parametrize(
    "body",
    [
        b'{"ok":true,"value":5,"id":2}{}',
        b'{"ok":true,"value":5,"id":2} 7',
        b'{"ok":true,"value":5,"id":2',
        b"not json",
        b"",
    ],
)
def test_a_forged_answer_that_is_not_one_json_value_is_refused(fake: Any, body: bytes) -> None:
    # C's answers are one JSON value per frame; a candidate writing its own frame on its
    # socket (fd 3) with anything more or less gets an error, never the value.
    code = (
        "import os\n"
        "def f(x):\n"
        f"    body = {body!r}\n"
        "    os.write(3, len(body).to_bytes(4, 'big') + body)\n"
        "    os._exit(0)\n"
    )
    spec = UnitTestReward([{"input": [1], "expected": 5}], entry="f")
    result = grade(fake, TEMPLATE, code, spec, extract=False)
    assert result.reward == 0.0 and result.tests[0].status == "error", result
    assert "unreadable answer" in result.tests[0].detail, result


@pytest.mark.parametrize("refusal", [OSError("no process"), KeyboardInterrupt()])
def test_a_candidate_that_cannot_start_leaves_no_descriptor(refusal: BaseException) -> None:
    # T's ends of the candidate's socket and pipes go with a spawn that fails, whether the
    # failure is an OSError or a BaseException (a worker's refused box).
    from collimate_rl.grading._harness import _Child, _Tail

    class Refusing:
        def spawn(self, fds: list[int], timeout: float) -> int:
            raise refusal

    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(type(refusal)):
            _Child(Refusing(), _Tail(), 1.0)  # type: ignore[arg-type]
    assert sorted(os.listdir("/proc/self/fd")) == before


class _Forking:
    """Candidates forked from the test process (as a fresh Z forks them)."""

    def spawn(self, fds: list[int], timeout: float) -> int:
        from collimate_rl.grading._child import _candidate_main

        pid = os.fork()
        if pid == 0:  # pragma: no cover - the candidate
            try:
                _candidate_main(list(fds))
            finally:
                os._exit(0)
        return pid


@contextlib.contextmanager
def _forked_runner(payload: dict[str, Any]) -> Iterator[Any]:
    """A harness ``Runner`` over ``_Forking``; its candidates killed and reaped after."""
    from collimate_rl.grading._harness import Runner

    runner = Runner(_Forking(), payload, deadline=float("inf"))  # type: ignore[arg-type]
    try:
        yield runner
    finally:
        runner.close()
        for pid in runner.pids:
            os.waitpid(pid, 0)


class _Interrupted(BaseException):
    """Stands for a worker's grade timeout: raised wherever the grade is."""


def test_a_grade_interrupted_mid_request_leaves_no_process_or_descriptor() -> None:
    # A worker's timeout (SIGALRM raising a BaseException) can land while T waits for a
    # candidate that is still loading: nothing of that candidate may outlive the grade.
    import signal
    import time

    from collimate_rl.grading._harness import Runner

    def interrupt(*_: Any) -> None:
        raise _Interrupted

    payload = {"source": "import time\ntime.sleep(60)\ndef f():\n    return 1\n"}
    before = sorted(os.listdir("/proc/self/fd"))
    runner = Runner(_Forking(), payload, deadline=float("inf"))  # type: ignore[arg-type]
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(_Interrupted):
            runner.call("f", ())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    (pid,) = runner.pids
    for _ in range(100):  # killed: reaped within moments, not after its minute
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the candidate outlived the interrupted grade")
    assert sorted(os.listdir("/proc/self/fd")) == before
    runner.close()


def test_a_first_call_that_kills_its_process_is_that_calls_failure_not_the_loads() -> None:
    # A process that dies in a call loaded fine: the next call gets a fresh process (loaded
    # again), never the first call's failure as a load failure.
    source = "import os\ndef f(x):\n    if x == 0:\n        os._exit(3)\n    return x * 2\n"
    with _forked_runner({"source": source}) as runner:
        first = runner.call("f", (0,))
        assert first.status == "crash" and "loading" not in first.detail, vars(first)
        second = runner.call("f", (4,))
        assert (second.status, second.value) == ("ok", 8), vars(second)
        third = runner.call("f", (5,))
        assert (third.status, third.value) == ("ok", 10), vars(third)
        assert len(runner.pids) == 2  # the second process kept serving


@pytest.mark.parametrize(
    "source, why",
    [("raise ValueError('boom')\n", "ValueError"), ("import time\ntime.sleep(60)\n", "timeout")],
)
def test_a_load_that_fails_fails_every_call_with_one_process(source: str, why: str) -> None:
    # A load that fails is that candidate's failure for every call: no second process, the
    # same reply.
    payload = {"source": source + "def f(x):\n    return x\n", "per_test_timeout": 0.5}
    with _forked_runner(payload) as runner:
        replies = [runner.call("f", (i,)) for i in range(3)]
        for reply in replies:
            assert reply.status != "ok" and "loading the candidate failed" in reply.detail
            assert why in reply.status + reply.etype + reply.detail, vars(reply)
        assert len(runner.pids) == 1


def test_only_container_arguments_come_back_from_a_call() -> None:
    # A list, dict or set argument gets the candidate's in-place changes back; when a call
    # has none, C does not send its arguments back at all (they would change nothing).
    source = (
        "def f(*args):\n"
        "    for a in args:\n"
        "        if isinstance(a, list): a.append('L')\n"
        "        if isinstance(a, dict): a['k'] = 'D'\n"
        "        if isinstance(a, set): a.add('S')\n"
        "    return len(args)\n"
    )
    with _forked_runner({"source": source}) as runner:
        xs: list[Any] = [1]
        d: dict[str, str] = {}
        s: set[Any] = {2}
        reply = runner.call("f", (7, xs, "x", d, (3,), s), mutable_args=True)
        assert (reply.status, reply.value) == ("ok", 6), vars(reply)
        assert (xs, d, s) == ([1, "L"], {"k": "D"}, {2, "S"})
        plain = runner.call("f", (7, "x", (3, [4]), None), mutable_args=True)
        assert (plain.status, plain.value, plain.args_after) == ("ok", 4, None), vars(plain)


#: A candidate whose call answers itself: it writes its own answer to the call (the first
#: after the load: id 2) on its socket, in pieces cut where the test says, a moment apart
#: (so T reads them apart), then waits to be killed.
_ANSWERS_IN_PIECES = """
import json, os, time
def f(text, cuts):
    body = json.dumps({"ok": True, "value": text, "id": 2}, separators=(",", ":")).encode()
    frame = len(body).to_bytes(4, "big") + body
    at = 0
    for cut in sorted({c for c in cuts if 0 < c < len(frame)}) + [len(frame)]:
        piece = memoryview(frame)[at:cut]
        while piece:
            piece = piece[os.write(3, piece):]
        at = cut
        time.sleep(0.002)
    time.sleep(60)
"""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(st.text(max_size=40), st.integers(0, 200_000).map(lambda n: "x" * n)),
    cuts=st.lists(st.integers(1, 200_100), max_size=5),
)
def test_an_answer_reads_the_same_however_it_arrives(text: str, cuts: list[int]) -> None:
    # T reads an answer whole from one read (the usual case), from pieces split anywhere
    # (its size too), and past one read's 64 KiB; each way it is the same value.
    with _forked_runner({"source": _ANSWERS_IN_PIECES}) as runner:
        reply = runner.call("f", (text, cuts))
        assert (reply.status, reply.value) == ("ok", text), (reply.status, reply.detail)
        child = runner.child
        assert child is not None and not child.rbuf, "a piece is left to be read as the next answer"
