"""Client operations: one generator, driven the same way by a sync and by an async client."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collimate_rl.wire._operations import ClientCall, Op, Sleep, adrive, drive


class Failed(Exception):
    """What a scripted call raises."""


class Scripted:
    """A client whose ``call(i)`` answers ``i * 10``, or raises when ``i`` is in ``failing``."""

    def __init__(self, failing: set[int]) -> None:
        self.failing = failing
        self.seen: list[int] = []

    def call(self, i: int, *, scale: int = 10) -> int:
        self.seen.append(i)
        if i in self.failing:
            raise Failed(i)
        return i * scale


class AsyncScripted(Scripted):
    async def call(self, i: int, *, scale: int = 10) -> int:  # type: ignore[override]
        await anyio.lowlevel.checkpoint()
        return super().call(i, scale=scale)


def _op(steps: int, log: list[str], recover: bool) -> Op[list[int]]:
    """Calls ``0..steps-1`` in turn (with a zero sleep between); on a failure, either go
    on (``recover``) or clean up with one more call and re-raise."""
    got: list[int] = []
    try:
        for i in range(steps):
            try:
                got.append((yield ClientCall("call", (i,), {"scale": 10})))
            except Failed:
                if not recover:
                    raise
                log.append(f"recovered {i}")
            yield Sleep(0)
    except Failed:
        yield ClientCall("call", (-1,))  # the cleanup call
        log.append("cleaned up")
        raise
    finally:
        log.append("closed")
    return got


def _run_sync(steps: int, failing: set[int], recover: bool) -> tuple[Any, list[int], list[str]]:
    client, log = Scripted(failing), list[str]()
    try:
        out: Any = drive(_op(steps, log, recover), client)
    except Failed as exc:
        out = ("raised", exc.args)
    return out, client.seen, log


def _run_async(steps: int, failing: set[int], recover: bool) -> tuple[Any, list[int], list[str]]:
    client, log = AsyncScripted(failing), list[str]()

    async def main() -> Any:
        try:
            return await adrive(_op(steps, log, recover), client)
        except Failed as exc:
            return ("raised", exc.args)

    return anyio.run(main), client.seen, log


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(0, 6),
    failing=st.sets(st.integers(0, 6), max_size=3),
    recover=st.booleans(),
)
def test_drive_and_adrive_run_an_operation_alike(
    steps: int, failing: set[int], recover: bool
) -> None:
    sync = _run_sync(steps, failing, recover)
    assert _run_async(steps, failing, recover) == sync
    out, seen, log = sync
    first_failure = min((i for i in failing if i < steps), default=None)
    if recover or first_failure is None:
        assert out == [i * 10 for i in range(steps) if i not in failing]
        assert seen == list(range(steps))
    else:  # the failure reached the operation, which cleaned up and re-raised it
        assert out == ("raised", (first_failure,))
        assert seen == [*range(first_failure + 1), -1]
        assert log[-2:] == ["cleaned up", "closed"]
    assert log[-1] == "closed"  # the generator is always finished or closed


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_adrive_sleeps_on_either_event_loop(backend: str) -> None:
    def op() -> Op[str]:
        yield Sleep(0.01)
        return "woke"

    async def main() -> str:
        return await adrive(op(), object())

    assert anyio.run(main, backend=backend) == "woke"


def test_an_operation_that_makes_no_call_returns_at_once() -> None:
    def op() -> Op[int]:
        return 7
        yield  # a generator all the same

    assert drive(op(), object()) == 7
