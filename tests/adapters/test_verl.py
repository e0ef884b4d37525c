"""The verl ``compute_score`` adapter: verl's signature and keyword arguments."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.verl import compute_score, compute_score_batch
from tests.adapters.conftest import ADD_GT, BAD, GOOD

PRIME = {"inputs": ["2 3\n", "1 1\n"], "outputs": ["5\n", "2\n"]}
PROGRAM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def test_signature_is_verls() -> None:
    params = list(inspect.signature(compute_score).parameters)
    assert params[:4] == ["data_source", "solution_str", "ground_truth", "extra_info"]


def test_called_as_verls_naive_reward_manager_calls_it(socket_path: str) -> None:
    kwargs = {"unix_socket": socket_path}
    assert (
        compute_score(
            data_source="toy",
            solution_str=GOOD,
            ground_truth=ADD_GT,
            extra_info={"index": 0},
            **kwargs,
        )
        == 1.0
    )
    assert compute_score("toy", BAD, ADD_GT, None, **kwargs) == 0.0


def test_prime_rows_and_json_strings(socket_path: str) -> None:
    import json

    assert compute_score("prime", PROGRAM, json.dumps(PRIME), {}, unix_socket=socket_path) == 1.0


def test_batch_form(socket_path: str) -> None:
    scores = compute_score_batch(
        data_sources=["toy"] * 3,
        solution_strs=[GOOD, BAD, PROGRAM],
        ground_truths=[ADD_GT, ADD_GT, PRIME],
        extra_infos=[{"index": i} for i in range(3)],
        unix_socket=socket_path,
        seed_mode="crn",
    )
    assert scores == [1.0, 0.0, 1.0]


def test_infra_errors_raise(tmp_path: Any) -> None:
    with pytest.raises(CollimateError) as caught:
        compute_score("toy", GOOD, ADD_GT, None, unix_socket=str(tmp_path / "x.sock"))
    assert not isinstance(caught.value, CollimateUsageError)
