"""The slime hooks, loaded and awaited the way slime does (slime itself is not on PyPI).

``load_function`` and the two dispatchers below follow slime's
``slime/utils/misc.py`` and ``slime/rollout/rm_hub/__init__.py``: a dotted path
split with ``rpartition(".")``; ``sample.reward = await rm(args, sample)``; with
``--group-rm`` (or a fanned-out list) ``rewards = await rm(args, samples)``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
from dataclasses import dataclass, field
from typing import Any

import pytest

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.seeds import seed_from_key
from collimate_rl.slime._reward import _translate, config_from_args
from tests.adapters.conftest import ADD_GT, BAD, GOOD, HALF


@functools.cache
def load_function(path: str) -> Any:
    module_path, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_path), attr)


@dataclass
class Sample:
    """The fields of slime's ``Sample`` a reward function sees."""

    prompt: str | list[dict[str, str]] = ""
    response: str = ""
    label: Any = None
    reward: float | dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    index: int | None = None


async def async_rm(args: argparse.Namespace, sample: Sample) -> Any:
    return await load_function(args.custom_rm_path)(args, sample)


async def batched_async_rm(args: argparse.Namespace, samples: list[Sample]) -> Any:
    return await load_function(args.custom_rm_path)(args, samples)


def make_args(socket_path: str, path: str = "collimate_rl.slime.reward_func", **kw: Any) -> Any:
    return argparse.Namespace(
        custom_rm_path=path, group_rm=False, collimate_unix_socket=socket_path, **kw
    )


def sample(response: str, **kw: Any) -> Sample:
    kw.setdefault("label", ADD_GT)
    return Sample(prompt="Write add(a, b).", response=response, **kw)


def test_single_samples_are_awaited_and_scored(socket_path: str) -> None:
    args = make_args(socket_path)
    samples = [sample(GOOD), sample(BAD), sample(HALF)]

    async def rollout() -> None:
        for s in samples:
            s.reward = await async_rm(args, s)

    asyncio.run(rollout())
    assert [s.reward for s in samples] == [1.0, 0.0, pytest.approx(2 / 3)]


def test_a_fanned_out_list_gets_a_list(socket_path: str) -> None:
    args = make_args(socket_path)
    rewards = asyncio.run(batched_async_rm(args, [sample(BAD), sample(GOOD)]))
    assert rewards == [0.0, 1.0]


def test_group_rm_keeps_order(socket_path: str) -> None:
    args = make_args(socket_path, "collimate_rl.slime.group_reward_func", collimate_concurrency=4)
    args.group_rm = True
    group = [sample(GOOD if i % 3 == 0 else BAD) for i in range(8)]

    async def generate_and_rm_group() -> None:
        rewards = await batched_async_rm(args, group)
        for s, r in zip(group, rewards, strict=True):
            s.reward = r

    asyncio.run(generate_and_rm_group())
    assert [s.reward for s in group] == [1.0, 0.0, 0.0] * 2 + [1.0, 0.0]
    assert asyncio.run(batched_async_rm(args, [])) == []


@pytest.mark.parametrize(
    "where",
    [
        {"label": ADD_GT},
        {"label": None, "metadata": {"ground_truth": ADD_GT}},
        {"label": "", "metadata": {"reward_spec": {"ground_truth": ADD_GT}}},
    ],
)
def test_ground_truth_comes_from_label_or_metadata(socket_path: str, where: dict[str, Any]) -> None:
    s = Sample(prompt="p", response=GOOD, **where)
    assert asyncio.run(async_rm(make_args(socket_path), s)) == 1.0


def test_a_sample_without_ground_truth_is_a_usage_error(socket_path: str) -> None:
    with pytest.raises(CollimateUsageError, match="no ground truth"):
        asyncio.run(async_rm(make_args(socket_path), Sample(response=GOOD)))


def test_config_falls_back_to_collimate_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLIMATE_SEED_MODE", "crn")
    monkeypatch.setenv("COLLIMATE_TIMEOUT_SECONDS", "7")
    config = config_from_args(argparse.Namespace(collimate_timeout_seconds=None))
    assert (config.seed_mode, config.timeout_seconds) == ("crn", 7)
    config = config_from_args(argparse.Namespace(collimate_seed_mode="deterministic"))
    assert config.seed_mode == "deterministic"
    assert config_from_args(argparse.Namespace(collimate_template_id="py")).template == "py"


def test_crn_key_matches_the_skyrl_adapter() -> None:
    """The same row gets the same seed under slime and SkyRL: ``<data_source>:<index>``."""
    config = config_from_args(argparse.Namespace(collimate_seed_mode="crn"))
    row = sample(GOOD, metadata={"data_source": "toy", "index": 7})
    _, _, seed = _translate(config, row, {})
    assert seed == seed_from_key("toy:7")
    _, _, by_prompt = _translate(config, sample(GOOD), {})
    assert by_prompt == seed_from_key(":Write add(a, b).")


def test_crn_seed_reaches_the_exec(socket_path: str) -> None:
    code = "```python\nimport os\ndef add(a, b):\n    assert os.environ['COLLIMATE_SEED'] == '%s'\n    return a + b\n```"
    seed = seed_from_key("toy:1")
    args = make_args(socket_path, collimate_seed_mode="crn")
    s = sample(code % seed, metadata={"data_source": "toy", "uid": 1})
    assert asyncio.run(async_rm(args, s)) == 1.0


def test_infra_errors_raise(tmp_path: Any) -> None:
    args = make_args(str(tmp_path / "no-node.sock"), collimate_timeout_seconds=2)
    with pytest.raises(CollimateError) as caught:
        asyncio.run(async_rm(args, sample(GOOD)))
    assert not isinstance(caught.value, CollimateUsageError)
