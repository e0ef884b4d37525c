"""Grades through our node's batch route (``exec_batch``) and through the per-exec contract path.

Both paths must give the same verdicts; the forgery battery must score 0 on the
batch path too; clients without the route (a daemon, a gateway) keep working.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from collimate_rl.errors import CollimateNotFoundError
from collimate_rl.grading import UnitTestReward, grade_batch
from collimate_rl.grading._batched import grade_items, request_window, supports_batches

from .conftest import TEMPLATE
from .test_forgery import ATTACKS, SPECS, _candidate

SPEC = UnitTestReward(
    [{"input": [2, 3], "expected": 5}, {"input": [10, -4], "expected": 6}], entry="add"
)
RIGHT = "def add(a, b):\n    return a + b\n"
HALF = "def add(a, b):\n    return 5\n"
WRONG = "def add(a, b):\n    return None\n"
CRASH = "import os\nos._exit(9)\n"
SEED = "ab" * 32


class Counting:
    """Delegates to a real client and counts how each exec travelled."""

    def __init__(self, client: Any, *, batch: bool = True) -> None:
        self._client = client
        self.calls = {"exec_batch": 0, "exec_once": 0, "session_exec": 0}
        if batch:
            self.exec_batch = self._exec_batch

    def _exec_batch(self, items: Any) -> Any:
        self.calls["exec_batch"] += 1
        return self._client.exec_batch(items)

    def exec_once(self, template_id: str, **kw: Any) -> Any:
        self.calls["exec_once"] += 1
        return self._client.exec_once(template_id, **kw)

    def session_exec(self, session_id: str, **kw: Any) -> Any:
        self.calls["session_exec"] += 1
        return self._client.session_exec(session_id, **kw)


class NoRoute(Counting):
    """A node that answers the batch route with 404 ``not_found`` (a real daemon)."""

    def _exec_batch(self, items: Any) -> Any:
        self.calls["exec_batch"] += 1
        raise CollimateNotFoundError("HTTP 404: no such route", status=404, error_code="not_found")


def _summary(results: list[Any]) -> list[tuple[float, int | None, int | None, bool, str | None]]:
    return [(r.reward, r.passed, r.total, r.infra_error, r.seed_ack) for r in results]


def test_both_paths_give_the_same_grades(client: Any) -> None:
    completions = [RIGHT, HALF, WRONG, CRASH] * 2
    batched, per_exec = Counting(client), Counting(client, batch=False)
    one = grade_batch(batched, TEMPLATE, completions, SPEC, seeds=SEED, extract=False)
    two = grade_batch(per_exec, TEMPLATE, completions, SPEC, seeds=SEED, extract=False)
    # the default concurrency (16) sends requests of 4 (``request_window``): 8 grades in 2
    assert batched.calls == {"exec_batch": 2, "exec_once": 0, "session_exec": 0}
    assert per_exec.calls["exec_batch"] == 0 and per_exec.calls["exec_once"] == len(completions)
    assert _summary(one) == _summary(two)
    assert [r.reward for r in one[:4]] == [1.0, 0.5, 0.0, 0.0]
    assert {r.seed for r in one} == {SEED} and {r.seed_ack for r in one} == {"verified"}
    assert [r.output_digest for r in one] == [r.output_digest for r in two]


class InFlight(Counting):
    """Counts the grades in flight across concurrent batch requests."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._lock = threading.Lock()
        self.now = self.most = 0
        self.sizes: list[int] = []

    def _exec_batch(self, items: Any) -> Any:
        with self._lock:
            self.sizes.append(len(items))
            self.now += len(items)
            self.most = max(self.most, self.now)
        try:
            return super()._exec_batch(items)
        finally:
            with self._lock:
                self.now -= len(items)


@pytest.mark.parametrize("concurrency", [1, 2, 6])
def test_concurrency_bounds_the_grades_in_flight(client: Any, concurrency: int) -> None:
    counting = InFlight(client)
    slow = "import time\ndef add(a, b):\n    time.sleep(0.2)\n    return a + b\n"
    results = grade_batch(
        counting, TEMPLATE, [slow] * 9, SPEC, concurrency=concurrency, extract=False
    )
    assert [r.reward for r in results] == [1.0] * 9
    per_request, in_flight = request_window(concurrency)
    assert max(counting.sizes) == per_request and sum(counting.sizes) == 9
    assert counting.most <= concurrency
    if in_flight > 1:  # 9 grades of 0.2 s: the requests overlapped
        assert counting.most > per_request


HANG = "import time\ndef add(a, b):\n    time.sleep(4)\n    return a + b\n"
#: A grade that takes seconds, then eight quick ones, four grades in flight.
HANG_FIRST: dict[str, Any] = {
    "completions": [HANG] + [RIGHT] * 8,
    "spec": SPEC,
    "concurrency": 4,
    "extract": False,
}


def _landed_last(results: list[Any], order: list[int]) -> bool:
    return [r.reward for r in results] == [1.0] * 9 and order == [*order[:-1], 0]


def test_a_grade_that_hangs_holds_back_only_its_own_request(client: Any) -> None:
    # one request at a time would send nothing past the hanging grade's request until
    # it is answered; with several in flight, every later grade lands before it
    order: list[int] = []
    results = grade_batch(
        Counting(client), TEMPLATE, on_result=lambda i, _: order.append(i), **HANG_FIRST
    )
    assert _landed_last(results, order) and sorted(order) == list(range(9)), order


@pytest.mark.anyio
async def test_agrade_batch_keeps_several_requests_in_flight(node: Any) -> None:
    from collimate_rl.grading import agrade_batch
    from collimate_rl.wire import AsyncCollimateClient

    order: list[int] = []
    async with AsyncCollimateClient(unix_socket=str(node.socket_path)) as client:
        results = await agrade_batch(
            client, TEMPLATE, on_result=lambda i, _: order.append(i), **HANG_FIRST
        )
    assert _landed_last(results, order) and sorted(order) == list(range(9)), order


def test_a_node_without_the_route_falls_back_and_is_remembered(client: Any) -> None:
    daemon = NoRoute(client)
    assert supports_batches(daemon)
    results = grade_batch(daemon, TEMPLATE, [RIGHT, WRONG], SPEC, extract=False)
    assert [r.reward for r in results] == [1.0, 0.0]
    assert daemon.calls == {"exec_batch": 1, "exec_once": 2, "session_exec": 0}
    assert not supports_batches(daemon)
    grade_batch(daemon, TEMPLATE, [RIGHT], SPEC, extract=False)
    assert daemon.calls["exec_batch"] == 1  # not asked again
    assert grade_items(daemon, TEMPLATE, [(RIGHT, SPEC, None, None)], timeout_seconds=10) is None


def test_without_the_route_several_requests_in_flight_fall_back_whole(client: Any) -> None:
    daemon = NoRoute(client)
    results = grade_batch(daemon, TEMPLATE, [RIGHT, WRONG] * 4, SPEC, concurrency=4, extract=False)
    assert [r.reward for r in results] == [1.0, 0.0] * 4
    # the first requests in flight were refused; nothing more was sent that way
    assert 1 <= daemon.calls["exec_batch"] <= request_window(4)[1]
    assert daemon.calls["exec_once"] == 8


class RouteGoesAway(Counting):
    """Answers the first batch request, then 404s (another node came up behind the URL)."""

    def _exec_batch(self, items: Any) -> Any:
        self.calls["exec_batch"] += 1
        if self.calls["exec_batch"] == 1:
            return self._client.exec_batch(items)
        raise CollimateNotFoundError("HTTP 404: no such route", status=404, error_code="not_found")


def test_a_route_that_goes_away_mid_batch_loses_no_grade(client: Any) -> None:
    node = RouteGoesAway(client)
    results = grade_batch(
        node, TEMPLATE, [RIGHT] * 4, SPEC, concurrency=2, on_infra_error="zero", extract=False
    )
    assert len(results) == 4  # every slot accounted for: graded, or flagged
    assert sorted(r.infra_error for r in results) == [False, True, True, True]
    assert {r.reward for r in results if not r.infra_error} == {1.0}


def test_members_grade_in_their_own_sessions_in_one_request(client: Any) -> None:
    parent = client.create_session(TEMPLATE)["session_id"]
    members = [c.session_id for c in client.fork_session(parent, 3).children]
    try:
        # the first member's candidate leaves a file and a process behind; the others
        # must see neither (and still get their honest grades)
        sneaky = (
            "import os, subprocess\nopen('/sandbox/planted', 'w').write('x')\n"
            "subprocess.Popen(['sleep', '30'])\ndef add(a, b):\n    return a + b\n"
        )
        probe = (
            "import os\nseen = os.path.exists('/sandbox/planted') or any("
            "'sleep' in open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') "
            "if p.isdigit() and os.path.exists(f'/proc/{p}/cmdline'))\n"
            "def add(a, b):\n    return None if seen else a + b\n"
        )
        fenced = [f"```python\n{code}```" for code in (sneaky, probe, probe)]
        items = [(text, SPEC, SEED, member) for text, member in zip(fenced, members, strict=True)]
        counting = Counting(client)
        outcomes = grade_items(counting, TEMPLATE, items, timeout_seconds=20)
        assert outcomes is not None and counting.calls["exec_batch"] == 1
        assert [getattr(o, "reward", o) for o in outcomes] == [1.0, 1.0, 1.0]
    finally:
        client.delete_sessions([parent, *members])
    assert not {parent, *members} & {s.session_id for s in client.list_sessions()}


@pytest.mark.parametrize("kind", list(SPECS))
def test_the_forgery_battery_scores_zero_on_the_batch_path(client: Any, kind: str) -> None:
    counting = Counting(client)
    completions = [_candidate(attack, kind) for attack in ATTACKS]
    results = grade_batch(
        counting, TEMPLATE, completions, SPECS[kind], timeout_seconds=15, extract=False
    )
    assert counting.calls["exec_batch"] >= 1 and counting.calls["exec_once"] == 0
    for attack, result in zip(ATTACKS, results, strict=True):
        assert not result.infra_error, (attack, result)
        assert (result.reward, result.passed) == (0.0, 0), (attack, result)


@pytest.mark.anyio
async def test_agrade_batch_takes_the_batch_route_too(node: Any) -> None:
    from collimate_rl.grading import agrade_batch
    from collimate_rl.wire import AsyncCollimateClient

    calls = []

    class AsyncCounting(AsyncCollimateClient):
        async def exec_batch(self, items: Any) -> Any:
            calls.append(len(items))
            return await super().exec_batch(items)

    async with AsyncCounting(unix_socket=str(node.socket_path)) as client:
        results = await agrade_batch(
            client, TEMPLATE, [RIGHT, HALF, WRONG], SPEC, seeds=SEED, extract=False
        )
    assert calls == [3]
    assert [r.reward for r in results] == [1.0, 0.5, 0.0]
    assert {r.seed_ack for r in results} == {"verified"}
