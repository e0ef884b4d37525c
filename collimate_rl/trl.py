"""TRL adapter: reward functions with the ``reward_funcs`` calling convention of TRL's trainers.

TRL calls ``reward_func(prompts=..., completions=..., completion_ids=...,
**columns)``, where every other dataset column arrives as a keyword argument
holding one value per completion, and expects one float per completion;
``None`` marks a completion it should not score (it becomes NaN). Here
``None`` means an infrastructure failure: a missing sandbox never turns into a
0.0 reward. Completions may be strings or chat messages.

Columns read: ``ground_truth`` (or ``reward_spec`` holding one; the name is
configurable), and for CRN seeds ``data_source``, ``crn_key`` / ``uid`` /
``index`` and ``crn_seed``.

.. code-block:: python

    from trl import GRPOTrainer
    from collimate_rl.trl import reward_func      # or make_reward_func(seed_mode="crn", ...)
    trainer = GRPOTrainer(model=..., reward_funcs=[reward_func], train_dataset=dataset)

>>> reward_func.__name__, async_reward_func.__name__
('collimate_reward', 'collimate_reward')
>>> completion_text([{"role": "assistant", "content": "x = 1"}])
'x = 1'
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from collimate_rl._adapters import (
    AdapterConfig,
    first_of,
    ground_truth_of,
    spec_and_seed,
)

__all__ = [
    "async_reward_func",
    "completion_text",
    "make_async_reward_func",
    "make_reward_func",
    "reward_func",
]

RewardFunc = Callable[..., list[float | None]]
AsyncRewardFunc = Callable[..., Awaitable[list[float | None]]]


def completion_text(completion: Any) -> str:
    """A completion as text: a string as is; chat messages -> the last assistant message's content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        messages = [m for m in completion if isinstance(m, Mapping)]
        answers = [m for m in messages if m.get("role", "assistant") == "assistant"]
        chosen = answers or messages
        if chosen:
            return str(chosen[-1].get("content") or "")
    return "" if completion is None else str(completion)


def _is_column(value: Any, n: int) -> bool:
    """A dataset column TRL passed: one value per completion (not a string)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == n


class _Rows:
    """One call's arguments, translated into what ``grade_batch`` takes."""

    def __init__(
        self,
        overrides: Mapping[str, Any],
        ground_truth_key: str,
        prompts: Sequence[Any] | None,
        completions: Sequence[Any],
        columns: Mapping[str, Any],
    ) -> None:
        self.config = AdapterConfig.resolve(None, overrides=overrides)
        n = len(completions)
        cache: dict[str, Any] = {}
        self.texts = [completion_text(c) for c in completions]
        self.specs: list[Any] = []
        self.seeds: list[str | None] = []
        for i in range(n):
            row = {k: v[i] for k, v in columns.items() if _is_column(v, n)}
            spec, seed = spec_and_seed(
                self.config,
                ground_truth_of(row.get(ground_truth_key), row),
                data_source=row.get("data_source"),
                key=first_of(row, "crn_key", "uid", "index")
                or first_of(row.get("extra_info"), "crn_key", "uid", "index"),
                prompt=prompts[i] if prompts is not None and i < len(prompts) else None,
                explicit_seed=row.get("crn_seed"),
                cache=cache,
            )
            self.specs.append(spec)
            self.seeds.append(seed)

    def grade(self) -> list[float | None]:
        from collimate_rl.grading import grade_batch

        if not self.texts:
            return []
        results = grade_batch(
            self.config.client(),
            self.config.template,
            self.texts,
            self.specs,
            seeds=self.seeds,
            timeout_seconds=self.config.timeout_seconds,
            concurrency=self.config.concurrency,
            on_infra_error="zero",
        )
        return [None if r.infra_error else float(r.reward) for r in results]


def make_reward_func(*, ground_truth_key: str = "ground_truth", **config: Any) -> RewardFunc:
    """A TRL reward function; ``config`` holds :class:`~collimate_rl.skyrl.AdapterConfig` fields.

    Unset fields fall back to ``COLLIMATE_<NAME>``, read at each call.

    >>> f = make_reward_func(seed_mode="crn", template="python3")
    >>> f([], [])
    []
    """

    def collimate_reward(
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        **kwargs: Any,
    ) -> list[float | None]:
        return _Rows(config, ground_truth_key, prompts, completions, kwargs).grade()

    return collimate_reward


def make_async_reward_func(
    *, ground_truth_key: str = "ground_truth", **config: Any
) -> AsyncRewardFunc:
    """The async variant (TRL awaits coroutine reward functions on its own event loop)."""

    async def collimate_reward(
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        **kwargs: Any,
    ) -> list[float | None]:
        rows = _Rows(config, ground_truth_key, prompts, completions, kwargs)
        return await asyncio.to_thread(rows.grade)

    return collimate_reward


#: A reward function configured from ``COLLIMATE_*`` alone.
reward_func: RewardFunc = make_reward_func()
#: Its async variant.
async_reward_func: AsyncRewardFunc = make_async_reward_func()
