"""The oracle's zygote on the real node: warm from the node's factory, still pristine.

Light sessions (``python3``: records run in boxes, docs/fast-path.md) get each
candidate as a box cloned by the template's master; sessions with a server of
their own (``python3-net``) from the session's factory F. Both are warm forks of
the template's interpreter; an exec with the full program in a light session has
no factory and forks its candidates from a fresh interpreter.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from collimate_rl.grading import UnitTestReward, grade

from .conftest import TEMPLATE

#: Prints where the candidate came from: a fork of the node's warm template
#: interpreter (its cmdline is the supervisor's, inherited by every fork) or of a
#: fresh ``-c`` one.
ORIGIN = (
    "_cmd = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
    "print('ZYGOTE', 'fresh' if b'-c' in _cmd else 'warm', flush=True)\n"
)
#: The networked twin: its sessions have a server, and a factory F.
SERVER_TEMPLATE = TEMPLATE + "-net"
ADD = "def add(a, b):\n    return a + b\n"
SPEC = UnitTestReward(
    [{"input": [1, 2], "expected": 3}, {"input": [5, 5], "expected": 10}],
    entry="add",
    per_test_timeout=2.0,
)


def _origin(tail: str) -> str:
    return [ln.split()[1] for ln in tail.splitlines() if ln.startswith("ZYGOTE ")][-1]


def test_grades_use_a_warm_zygote_from_the_factory(client: Any) -> None:
    result = grade(client, TEMPLATE, ORIGIN + ADD, SPEC, extract=False)
    assert result.reward == 1.0, result
    assert _origin(result.output_tail) == "warm"


#: Counts copies of the (reversed) argument in the candidate's own memory, read
#: through /proc/self/mem and, for anonymous mappings, with ctypes; it never
#: builds the marker itself (first 20 characters, then the rest, compared apart).
SCANNER = r"""
import ctypes, os

def _hits(region, head, tail):
    hits, at = 0, region.find(head)
    while at >= 0:
        if region[at + 20 : at + 20 + len(tail)] == tail:
            hits += 1
        at = region.find(head, at + 1)
    return hits

def scan(masked):
    head, tail = masked[-1:-21:-1].encode(), masked[-21::-1].encode()
    hits = 0
    maps = open('/proc/self/maps').read().splitlines()
    with open('/proc/self/mem', 'rb', 0) as mem:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split('-'))
            if 'r' not in fields[1] or line.endswith(('[vvar]', '[vsyscall]')):
                continue
            try:
                mem.seek(lo)
                hits += _hits(mem.read(hi - lo), head, tail)
            except (OSError, ValueError, OverflowError):
                pass
            if len(fields) < 6 or fields[5] == '[heap]':  # anonymous: safe for ctypes
                hits += _hits(ctypes.string_at(lo, hi - lo), head, tail)
    return hits
"""


def test_candidate_memory_holds_no_payload_secret(client: Any) -> None:
    marker = "SECRET-" + secrets.token_hex(16)
    spec = UnitTestReward([{"input": [1, 2], "expected": marker}], entry="add")
    code = (
        ORIGIN
        + SCANNER
        + f"print('HITS', scan({marker[::-1]!r}), flush=True)\n"
        + f"def add(a, b):\n    return 'HITS %d' % scan({marker[::-1]!r})\n"
    )
    result = grade(client, TEMPLATE, code, spec, extract=False)
    assert result.passed == 0 and not result.infra_error, result
    assert _origin(result.output_tail) == "warm"
    assert "HITS 0" in result.output_tail and "HITS 1" not in result.output_tail, result
    assert marker not in result.output_tail


#: The factory is the candidate's parent (it forks candidates directly), or its
#: grandparent under a zygote; its own parent is the session server, pid 1.
KILL_FACTORY = (
    "import os, signal\n"
    "def _ppid(pid):\n"
    "    return int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])\n"
    "_f = os.getppid()\n"
    "if _ppid(_f) != 1:\n"
    "    _f = _ppid(_f)\n"
    "os.kill(_f, signal.SIGKILL)\n"
)


def test_a_candidate_killing_the_factory_only_costs_speed(client: Any) -> None:
    session = client.create_session(SERVER_TEMPLATE)["session_id"]
    try:
        first = grade(
            client,
            SERVER_TEMPLATE,
            KILL_FACTORY + ORIGIN + ADD,
            SPEC,
            session_id=session,
            extract=False,
        )
        assert first.reward == 1.0 and _origin(first.output_tail) == "warm", first
        for _ in range(2):  # later grades in the session: a fresh interpreter
            again = grade(
                client, SERVER_TEMPLATE, ORIGIN + ADD, SPEC, session_id=session, extract=False
            )
            assert again.reward == 1.0 and _origin(again.output_tail) == "fresh", again
        wrong = grade(
            client,
            SERVER_TEMPLATE,
            "def add(a, b):\n    return 3\n",
            SPEC,
            session_id=session,
            extract=False,
        )
        assert wrong.reward == 0.5
    finally:
        client.delete_session(session)
    # a new session has its own factory again
    result = grade(client, SERVER_TEMPLATE, ORIGIN + ADD, SPEC, extract=False)
    assert result.reward == 1.0 and _origin(result.output_tail) == "warm"


#: A box's candidate is pid 1 of its own pid namespace: its source (the master)
#: is not even there to name. It kills what it can see (nothing but itself).
KILL_SOURCE = (
    "import os, signal\n"
    "assert os.getpid() == 1 and os.getppid() == 0\n"
    "try:\n"
    "    os.kill(-1, signal.SIGKILL)\n"
    "except ProcessLookupError:  # there is nobody else\n"
    "    pass\n"
)


def test_a_light_sessions_candidate_cannot_reach_its_source(client: Any) -> None:
    session = client.create_session(TEMPLATE)["session_id"]
    try:
        first = grade(
            client, TEMPLATE, KILL_SOURCE + ORIGIN + ADD, SPEC, session_id=session, extract=False
        )
        assert first.reward == 1.0 and _origin(first.output_tail) == "warm", first
        for _ in range(2):  # later grades in the session: still warm boxes
            again = grade(client, TEMPLATE, ORIGIN + ADD, SPEC, session_id=session, extract=False)
            assert again.reward == 1.0 and _origin(again.output_tail) == "warm", again
    finally:
        client.delete_session(session)


def test_the_fallback_still_grades_without_a_factory(fake: Any) -> None:
    # the subprocess double has no COLLIMATE_ZYGOTE_FD: T starts a fresh interpreter
    result = grade(fake, TEMPLATE, ORIGIN + ADD, SPEC, extract=False)
    assert result.reward == 1.0 and _origin(result.output_tail) == "fresh", result


@pytest.fixture
def full_program_client(client: Any) -> Iterator[Any]:
    """The node's client, made to ship the full program (as after a warm-stub miss)."""
    grade_module = sys.modules["collimate_rl.grading._grade_exec"]
    grade_module._WARM.missed(client)
    try:
        yield client
    finally:
        grade_module._WARM._cold.pop(client, None)


def test_another_interpreter_build_compiles_the_shipped_source(
    full_program_client: Any, fake: Any, monkeypatch: Any
) -> None:
    from collimate_rl.grading import _shipping

    monkeypatch.setattr(_shipping, "marshal_tag", lambda: "another-build")
    _shipping._full_program_head.cache_clear()
    try:
        assert "another-build" in SPEC.build(ADD).code
        for where, template, origin in (
            (full_program_client, SERVER_TEMPLATE, "warm"),
            (full_program_client, TEMPLATE, "fresh"),  # an exec box has no factory
            (fake, TEMPLATE, "fresh"),
        ):
            result = grade(where, template, ORIGIN + ADD, SPEC, extract=False)
            assert result.reward == 1.0 and _origin(result.output_tail) == origin, result
    finally:
        _shipping._full_program_head.cache_clear()


def test_the_node_runs_the_warm_harness_from_a_short_stub(client: Any) -> None:
    from collimate_rl.grading import _shipping

    program = SPEC.build(ADD)
    assert len(program.warm_code) < 2000 < 50_000 < len(program.code)
    stub = client.exec_once(TEMPLATE, code=program.warm_code, files=program.files)
    assert _shipping.HARNESS_MISS not in stub["stdout"], stub
    assert SPEC.read_frame(stub["stdout"], json.loads(program.files[0]["content"])["nonce"])
    grade_module = sys.modules["collimate_rl.grading._grade_exec"]
    result = grade(client, TEMPLATE, ORIGIN + ADD, SPEC, extract=False)
    assert result.reward == 1.0 and _origin(result.output_tail) == "warm", result
    assert grade_module._WARM.warm(client)


@pytest.mark.parametrize(
    ("template", "origin"),
    [(SERVER_TEMPLATE, "warm"), (TEMPLATE, "fresh")],
    ids=["server", "light"],
)
def test_the_full_program_grades_on_the_node_too(
    full_program_client: Any, template: str, origin: str
) -> None:
    # in a light session the full program runs as an exec in a box, which has no
    # factory: the harness forks its candidates from a fresh interpreter there
    result = grade(full_program_client, template, ORIGIN + ADD, SPEC, extract=False)
    assert result.reward == 1.0 and _origin(result.output_tail) == origin, result
    wrong = grade(full_program_client, template, "def add(a, b):\n    return 3\n", SPEC)
    assert wrong.reward == 0.5, wrong


def test_a_warm_stub_miss_costs_one_exec_then_the_client_ships_the_full_program(
    fake: Any,
) -> None:
    # the subprocess double has no warm harness: the stub misses, having run nothing
    first = grade(fake, TEMPLATE, ADD, SPEC, extract=False)
    assert first.reward == 1.0 and fake.calls == 2, first
    second = grade(fake, TEMPLATE, ADD, SPEC, extract=False)
    assert second.reward == 1.0 and fake.calls == 3, second


def test_a_candidate_in_a_forked_parent_cannot_write_into_a_childs_layers(client: Any) -> None:
    # A fork freezes the parent's layer and shares it with the child; the
    # factory's mount namespace still had the old overlay, so it must go.
    parent = client.create_session(TEMPLATE)["session_id"]
    child = ""
    try:
        client.session_exec(parent, command="echo base > base.txt")
        child = client.fork_session(parent, 1).children[0].session_id
        writer = "open('/sandbox/late.txt', 'w').write('late')\n" + ADD
        result = grade(client, TEMPLATE, writer, SPEC, session_id=parent, extract=False)
        assert result.reward == 1.0, result
        assert client.session_exec(parent, command="cat late.txt")["stdout"] == "late"
        seen = client.session_exec(child, command="cat base.txt late.txt 2>&1")["stdout"]
        assert seen.startswith("base\n") and "No such file" in seen, seen
    finally:
        client.delete_session(parent)
        if child:
            client.delete_session(child)
