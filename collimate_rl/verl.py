"""verl adapter: a ``custom_reward_function`` graded in a Collimate sandbox.

.. code-block:: yaml

    custom_reward_function:
      path: /path/to/site-packages/collimate_rl/verl.py   # or a file that imports it
      name: compute_score
      reward_kwargs: {seed_mode: crn, template: python3}  # optional; else COLLIMATE_*

verl's reward managers call ``compute_score(data_source, solution_str,
ground_truth, extra_info, **reward_kwargs)`` per response;
:func:`compute_score_batch` is the batch form (``BatchRewardManager``). The
ground truth may be any format
:func:`~collimate_rl.grading.reward_spec_from_ground_truth` reads (PRIME /
verl ``{"inputs", "outputs", "fn_name"}`` included). Infrastructure failures
raise; they are never scored.

>>> import inspect
>>> list(inspect.signature(compute_score).parameters)[:4]
['data_source', 'solution_str', 'ground_truth', 'extra_info']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collimate_rl._adapters import AdapterConfig, first_of, ground_truth_of, spec_and_seed
from collimate_rl.errors import CollimateUsageError

__all__ = ["compute_score", "compute_score_batch"]


def _grade(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any],
    overrides: dict[str, Any],
) -> list[float]:
    from collimate_rl.grading import grade_batch

    config = AdapterConfig.resolve(None, overrides=overrides)
    cache: dict[str, Any] = {}
    specs: list[Any] = []
    seeds: list[str | None] = []
    if not len(data_sources) == len(solution_strs) == len(ground_truths) == len(extra_infos):
        raise CollimateUsageError("one data_source, ground_truth and extra_info per solution")
    for data_source, truth, extra in zip(data_sources, ground_truths, extra_infos, strict=True):
        truth = ground_truth_of(truth, extra)
        spec, seed = spec_and_seed(
            config,
            truth,
            data_source=data_source,
            key=first_of(extra, "crn_key", "uid", "index"),
            prompt=truth,  # verl passes no prompt; the problem's tests identify it
            explicit_seed=first_of(extra, "crn_seed"),
            cache=cache,
        )
        specs.append(spec)
        seeds.append(seed)
    if not specs:
        return []
    results = grade_batch(
        config.client(),
        config.template,
        list(solution_strs),
        specs,
        seeds=seeds,
        timeout_seconds=config.timeout_seconds,
        concurrency=config.concurrency,
        on_infra_error="raise",
    )
    return [float(r.reward) for r in results]


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> float:
    """The reward of one response; ``kwargs`` are ``AdapterConfig`` fields (verl's ``reward_kwargs``).

    CRN key: ``"<data_source>:<extra_info.crn_key | uid | index>"``, else the
    ground truth stands in for the (unseen) prompt.

    Raises:
        CollimateError: an infrastructure failure.
        CollimateUsageError: an unreadable ground truth.
    """
    (score,) = _grade([data_source], [solution_str], [ground_truth], [extra_info], kwargs)
    return score


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[float]:
    """The batch form: one reward per response, in order, graded concurrently."""
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    return _grade(data_sources, solution_strs, ground_truths, infos, kwargs)
