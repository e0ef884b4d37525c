"""slime reward hooks: ``--custom-rm-path collimate_rl.slime.reward_func``.

slime loads the hook with ``load_function(path)`` (``rpartition(".")`` then
``importlib``) and awaits it as ``await rm(args, sample)``, or with a list of
samples (``--group-rm``, or a custom generate function that fans out). Each
sample's ground truth is translated once into a reward spec; the grade is one
exec through :func:`collimate_rl.grading.grade_batch`, run in a worker thread
so slime's event loop keeps going.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from collimate_rl._adapters import (
    AdapterConfig,
    first_of,
    get,
    ground_truth_of,
    spec_and_seed,
)

__all__ = ["config_from_args", "group_reward_func", "reward_func"]


def config_from_args(args: Any) -> AdapterConfig:
    """The adapter config: ``args.collimate_<name>``, else ``$COLLIMATE_<NAME>``, else the default.

    >>> from types import SimpleNamespace
    >>> config_from_args(SimpleNamespace(collimate_seed_mode="crn")).seed_mode
    'crn'
    """
    return AdapterConfig.resolve(args, prefix="collimate_")


def _translate(
    config: AdapterConfig, sample: Any, cache: dict[str, Any]
) -> tuple[str, Any, str | None]:
    """``(response, spec, seed)`` for one sample (a slime ``Sample`` or a dict)."""
    metadata = get(sample, "metadata") or {}
    ground_truth = ground_truth_of(get(sample, "label"), metadata)
    spec, seed = spec_and_seed(
        config,
        ground_truth,
        data_source=get(metadata, "data_source"),
        key=first_of(metadata, "crn_key", "uid", "index"),
        prompt=get(sample, "prompt"),
        explicit_seed=get(metadata, "crn_seed"),
        cache=cache,
    )
    return str(get(sample, "response") or ""), spec, seed


async def _grade(args: Any, samples: Sequence[Any]) -> list[float]:
    from collimate_rl.grading import grade_batch

    config = config_from_args(args)
    cache: dict[str, Any] = {}
    rows = [_translate(config, sample, cache) for sample in samples]
    if not rows:
        return []
    client = config.client()
    results = await asyncio.to_thread(
        grade_batch,
        client,
        config.template,
        [response for response, _, _ in rows],
        [spec for _, spec, _ in rows],
        seeds=[seed for _, _, seed in rows],
        timeout_seconds=config.timeout_seconds,
        concurrency=config.concurrency,
        on_infra_error="raise",
    )
    return [float(result.reward) for result in results]


async def reward_func(args: Any, sample: Any, **kwargs: Any) -> float | list[float]:
    """slime's ``--custom-rm-path`` hook: the reward of one ``Sample`` (or of each in a list).

    Ground truth: ``sample.label``, else ``metadata["ground_truth"]``, else
    ``metadata["reward_spec"]["ground_truth"]``. Config: ``args.collimate_*``
    then ``COLLIMATE_*`` (``template``, ``timeout_seconds``, ``seed_mode``,
    ``base_seed``, ``entry``, ``format``, ``all_or_nothing``, ``concurrency``,
    ``base_url``, ``api_key``, ``unix_socket``). CRN key:
    ``"<metadata.data_source>:<metadata.crn_key | uid | index | prompt text>"``.

    Raises:
        CollimateError: an infrastructure failure (never folded into a reward).
        CollimateUsageError: a sample without a readable ground truth.
    """
    if isinstance(sample, (list, tuple)):
        return await _grade(args, sample)
    (reward,) = await _grade(args, [sample])
    return reward


async def group_reward_func(args: Any, samples: Sequence[Any], **kwargs: Any) -> list[float]:
    """slime's ``--group-rm`` hook: one reward per sample, in order, graded concurrently."""
    return await _grade(args, samples)
