"""The TRL reward functions, called with TRL's ``reward_funcs`` convention."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.trl import async_reward_func, make_async_reward_func, make_reward_func
from tests.adapters.conftest import ADD_GT, BAD, GOOD, HALF

PROMPTS = [[{"role": "user", "content": "Write add(a, b)."}]] * 3


def call(func: Any, completions: list[Any], **columns: Any) -> Any:
    """As GRPOTrainer does: prompts, completions, completion_ids, columns, trainer_state."""
    n = len(completions)
    columns.setdefault("ground_truth", [ADD_GT] * n)
    return func(
        prompts=PROMPTS[:n],
        completions=completions,
        completion_ids=[[1, 2]] * n,
        trainer_state=None,
        **columns,
    )


def test_string_completions(socket_path: str) -> None:
    func = make_reward_func(unix_socket=socket_path)
    assert call(func, [GOOD, BAD, HALF]) == [1.0, 0.0, pytest.approx(2 / 3)]


def test_chat_completions(socket_path: str) -> None:
    func = make_reward_func(unix_socket=socket_path)
    chats = [[{"role": "assistant", "content": text}] for text in (BAD, GOOD)]
    assert call(func, chats) == [0.0, 1.0]


def test_ground_truth_from_a_reward_spec_column(socket_path: str) -> None:
    func = make_reward_func(unix_socket=socket_path)
    column = [{"method": "rule", "ground_truth": ADD_GT}] * 2
    assert call(func, [GOOD, BAD], ground_truth=[None, None], reward_spec=column) == [1.0, 0.0]


def test_a_custom_ground_truth_column(socket_path: str) -> None:
    func = make_reward_func(unix_socket=socket_path, ground_truth_key="tests")
    assert call(func, [GOOD], tests=[ADD_GT], ground_truth=[None]) == [1.0]


def test_async_variant_is_a_coroutine_function(socket_path: str) -> None:
    func = make_async_reward_func(unix_socket=socket_path)
    assert inspect.iscoroutinefunction(func) and inspect.iscoroutinefunction(async_reward_func)
    assert asyncio.run(call(func, [GOOD, BAD])) == [1.0, 0.0]


def test_infra_errors_are_none_not_zero(tmp_path: Any) -> None:
    sync = make_reward_func(unix_socket=str(tmp_path / "gone.sock"), timeout_seconds=2)
    assert call(sync, [GOOD, BAD]) == [None, None]
    async_ = make_async_reward_func(unix_socket=str(tmp_path / "gone.sock"), timeout_seconds=2)
    assert asyncio.run(call(async_, [GOOD])) == [None]


def test_bad_rows_are_errors_not_none(socket_path: str) -> None:
    func = make_reward_func(unix_socket=socket_path)
    with pytest.raises(CollimateUsageError):
        call(func, [GOOD], ground_truth=[{"foo": 1}])


def test_empty_batch() -> None:
    assert make_reward_func()(prompts=[], completions=[]) == []


def test_string_kwargs_are_not_columns(socket_path: str) -> None:
    func = make_reward_func(unix_socket=socket_path)
    assert call(func, [GOOD, BAD], note="ab") == [1.0, 0.0]
