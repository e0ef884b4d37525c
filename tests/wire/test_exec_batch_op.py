"""``exec_batch_op``: one batch request, its shed items resent, a missing route remembered."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_rl.errors import CollimateCapacityError, CollimateNotFoundError
from collimate_rl.wire._extensions import exec_batch_op, has_batch_route
from collimate_rl.wire._operations import drive


def _shed() -> CollimateCapacityError:
    return CollimateCapacityError("shed", status=503, error_code="at_capacity")


def _no_route() -> CollimateNotFoundError:
    return CollimateNotFoundError("HTTP 404: no such route", status=404, error_code="not_found")


class Node:
    """Answers ``{"n": n}`` items with ``{"ran": n}``; sheds the items listed per request."""

    retries, backoff = 3, 0.0

    def __init__(self, shed_per_request: list[set[int]], then: BaseException | None = None):
        self.shed_per_request = shed_per_request
        self.then = then  # raised by the request after the scripted ones
        self.requests: list[list[int]] = []

    def exec_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        ns = [item["n"] for item in items]
        self.requests.append(ns)
        turn = len(self.requests) - 1
        if turn >= len(self.shed_per_request) and self.then is not None:
            raise self.then
        shed = self.shed_per_request[turn] if turn < len(self.shed_per_request) else set()
        return [_shed() if n in shed else {"ran": n} for n in ns]


@settings(max_examples=80, deadline=None)
@given(
    size=st.integers(1, 8),
    rounds=st.lists(st.sets(st.integers(0, 7)), max_size=5),
)
def test_shed_items_are_resent_until_they_run_or_the_retries_run_out(
    size: int, rounds: list[set[int]]
) -> None:
    node = Node(rounds)
    answers = drive(exec_batch_op(node, [{"n": n} for n in range(size)]), node)
    assert answers is not None and len(answers) == size
    # each request after the first carries exactly the items still shed, in order
    for turn, (before, after) in enumerate(zip(node.requests, node.requests[1:], strict=False)):
        assert after == [n for n in before if n in rounds[turn]]
    assert len(node.requests) <= 1 + node.retries
    for n, answer in enumerate(answers):
        last = max(i for i, sent in enumerate(node.requests) if n in sent)
        shed_last = last < len(rounds) and n in rounds[last]
        assert answer == {"ran": n} if not shed_last else isinstance(answer, CollimateCapacityError)


def test_a_node_without_the_route_answers_none_and_is_remembered() -> None:
    node = Node([], then=_no_route())
    assert drive(exec_batch_op(node, [{"n": 0}]), node) is None
    assert not has_batch_route(node)
    assert drive(exec_batch_op(node, [{"n": 0}]), node) is None
    assert len(node.requests) == 1  # not asked again


def test_a_route_that_goes_away_on_a_resend_answers_what_it_owed_with_failed() -> None:
    node = Node([{1, 2}], then=_no_route())
    answers = drive(
        exec_batch_op(node, [{"n": n} for n in range(3)], lambda exc: ("lost", exc)), node
    )
    assert answers is not None and answers[0] == {"ran": 0}
    assert [a[0] for a in answers[1:]] == ["lost", "lost"]
    assert isinstance(answers[1][1], CollimateNotFoundError)


def test_a_request_that_fails_whole_answers_each_item_with_failed_which_may_raise() -> None:
    node = Node([], then=OSError("connection reset"))
    answers = drive(exec_batch_op(node, [{"n": 0}, {"n": 1}], lambda exc: repr(exc)), node)
    assert answers == ["OSError('connection reset')"] * 2

    def refuse(exc: Exception) -> Any:
        raise ValueError("not an infrastructure failure") from exc

    node = Node([], then=OSError("connection reset"))
    with pytest.raises(ValueError, match="not an infrastructure"):
        drive(exec_batch_op(node, [{"n": 0}], refuse), node)
