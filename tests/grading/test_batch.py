"""grade_batch / agrade_batch: order, alignment, concurrency, progress and infra errors."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from collimate_rl.errors import CollimateCapacityError, CollimateError, CollimateUsageError
from collimate_rl.grading import UnitTestReward, agrade_batch, grade, grade_batch

from ._fake import SubprocessClient
from .conftest import TEMPLATE

SPEC = UnitTestReward(
    [{"input": [1, 2], "expected": 3}, {"input": [5, 5], "expected": 10}],
    entry="add",
    per_test_timeout=1.0,
)
CANDIDATES = {
    1.0: "def add(a, b):\n    return a + b\n",
    0.5: "def add(a, b):\n    return 3\n",
    0.0: "def add(a, b):\n    raise ValueError\n",
}
INFRA = "# infra-failure\n"


def _mixed(n: int) -> tuple[list[str], list[float]]:
    rewards = [(1.0, 0.5, 0.0)[(i * 7) % 3] for i in range(n)]
    return [CANDIDATES[r] for r in rewards], rewards


class FlakyClient(SubprocessClient):
    """Raises an infra error for completions marked INFRA; tracks concurrency."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def exec_once(self, template_id: str, **kw: Any) -> dict[str, Any]:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if INFRA.strip() in kw["files"][0]["content"]:
                time.sleep(0.05)
                raise CollimateCapacityError(
                    "HTTP 503: at capacity", status=503, error_code="at_capacity"
                )
            return super().exec_once(template_id, **kw)
        finally:
            with self.lock:
                self.active -= 1


def test_batch_preserves_order_on_the_node(client: Any) -> None:
    completions, rewards = _mixed(9)
    seen: list[tuple[int, int]] = []
    results = grade_batch(
        client,
        TEMPLATE,
        completions,
        SPEC,
        concurrency=4,
        progress=lambda done, total: seen.append((done, total)),
        extract=False,
    )
    assert [r.reward for r in results] == rewards
    assert seen == [(i, 9) for i in range(1, 10)]


def test_batch_modes_with_mixed_task_and_infra_failures() -> None:
    completions, rewards = _mixed(8)
    for i in (1, 4, 5):
        completions[i] = INFRA + completions[i]
    flaky = FlakyClient()

    zero = grade_batch(
        flaky, TEMPLATE, completions, SPEC, concurrency=3, on_infra_error="zero", extract=False
    )
    assert len(zero) == 8
    for i, result in enumerate(zero):
        if i in (1, 4, 5):
            assert result.infra_error and result.reward == 0.0
            assert result.error and "CollimateCapacityError" in result.error
        else:
            assert not result.infra_error and result.reward == rewards[i]
    assert flaky.peak <= 3

    skip = grade_batch(
        flaky, TEMPLATE, completions, SPEC, concurrency=3, on_infra_error="skip", extract=False
    )
    assert [r.reward for r in skip] == [r for i, r in enumerate(rewards) if i not in (1, 4, 5)]

    with pytest.raises(CollimateCapacityError):
        grade_batch(flaky, TEMPLATE, completions, SPEC, concurrency=3, extract=False)


def test_batch_arguments_are_checked() -> None:
    fake = SubprocessClient()
    with pytest.raises(CollimateUsageError, match="on_infra_error"):
        grade_batch(fake, TEMPLATE, ["x"], SPEC, on_infra_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(CollimateUsageError, match="seeds"):
        grade_batch(fake, TEMPLATE, ["x", "y"], SPEC, seeds=["ab" * 32])
    with pytest.raises(CollimateUsageError, match="seed"):
        grade(fake, TEMPLATE, "x", SPEC, seed="nope")
    with pytest.raises(CollimateUsageError, match="concurrency"):
        grade_batch(fake, TEMPLATE, ["x"], SPEC, concurrency=0)
    assert grade_batch(fake, TEMPLATE, [], SPEC) == []
    assert fake.calls == 0


@pytest.mark.parametrize("mode", ["raise", "zero", "skip"])
def test_node_stopped_mid_batch(mode: str) -> None:
    from collimate_rl.node import LocalNode

    completions, rewards = _mixed(6)
    with LocalNode() as node:
        client = node.client(retries=0)

        def progress(done: int, total: int) -> None:
            if done == 2:
                node.stop()

        if mode == "raise":
            with pytest.raises(CollimateError):
                grade_batch(
                    client,
                    TEMPLATE,
                    completions,
                    SPEC,
                    concurrency=1,
                    progress=progress,
                    extract=False,
                )
            return
        results = grade_batch(
            client,
            TEMPLATE,
            completions,
            SPEC,
            concurrency=1,
            progress=progress,
            on_infra_error=mode,  # type: ignore[arg-type]
            extract=False,
        )
    # Grades finish in order (one at a time); the node stops after the second
    # (work admitted before it stops accepting may still finish while it drains).
    flags = [r.infra_error for r in results]
    if mode == "zero":
        assert len(results) == 6
        assert flags[:2] == [False, False] and flags[-1] is True
        assert flags == sorted(flags)  # graded first, then only infra errors
        for result, reward in zip(results, rewards, strict=True):
            assert result.reward == (0.0 if result.infra_error else reward)
    else:
        assert 2 <= len(results) < 6 and not any(flags)
        assert [r.reward for r in results] == rewards[: len(results)]


def test_async_batch_on_the_node(node: Any) -> None:
    from collimate_rl.wire import AsyncCollimateClient

    completions, rewards = _mixed(6)
    completions[3] = INFRA + completions[3]
    seen: list[int] = []

    class AsyncFlaky:
        def __init__(self) -> None:
            self.inner = AsyncCollimateClient(unix_socket=str(node.socket_path))

        async def exec_once(self, template_id: str, **kw: Any) -> Any:
            if INFRA.strip() in kw["files"][0]["content"]:
                raise CollimateCapacityError("at capacity", status=503, error_code="at_capacity")
            return await self.inner.exec_once(template_id, **kw)

    async def main() -> None:
        flaky = AsyncFlaky()
        results = await agrade_batch(
            flaky,
            TEMPLATE,
            completions,
            SPEC,
            concurrency=3,
            on_infra_error="zero",
            progress=lambda done, total: seen.append(done),
            extract=False,
        )
        assert [r.infra_error for r in results] == [i == 3 for i in range(6)]
        assert [r.reward for i, r in enumerate(results) if i != 3] == [
            r for i, r in enumerate(rewards) if i != 3
        ]
        with pytest.raises(CollimateCapacityError):
            await agrade_batch(flaky, TEMPLATE, completions, SPEC, concurrency=2, extract=False)
        await flaky.inner.aclose()

    anyio.run(main)
    assert seen == list(range(1, 7))


def test_single_grades_raise_infra_errors_and_keep_task_errors_as_rewards() -> None:
    from collimate_rl.errors import CollimateTaskError, CollimateTransportError

    class Broken:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def exec_once(self, template_id: str, **kw: Any) -> Any:
            raise self.exc

    with pytest.raises(CollimateTransportError) as info:
        grade(Broken(ConnectionRefusedError("refused")), TEMPLATE, "x", SPEC)
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    with pytest.raises(CollimateCapacityError):
        grade(Broken(CollimateCapacityError("full", status=503)), TEMPLATE, "x", SPEC)
    with pytest.raises(KeyError):  # a bug is neither: it propagates untouched
        grade(Broken(KeyError("bug")), TEMPLATE, "x", SPEC)
    task = grade(
        Broken(CollimateTaskError("disk", exit_code=44, output="no space")), TEMPLATE, "x", SPEC
    )
    assert task.reward == 0.0 and not task.infra_error and task.exit_code == 44
