"""The public surface: exports, docstrings that run, sync/async parity."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import collimate_rl.grading as grading

MODULES = [
    "collimate_rl.grading",
    "collimate_rl.grading.extract",
    "collimate_rl.grading.specs",
    "collimate_rl.grading.result",
    "collimate_rl.grading.grade",
    "collimate_rl.grading.ground_truth",
    "collimate_rl.grading.replay",
    "collimate_rl.grading._codec",
]


def test_exports() -> None:
    assert sorted(grading.__all__) == sorted(set(grading.__all__))
    for name in grading.__all__:
        assert getattr(grading, name) is not None, name
    for module_name in MODULES[1:-1]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert hasattr(module, name), (module_name, name)
    expected = {
        "RewardSpec",
        "UnitTestReward",
        "PropertyReward",
        "IOReward",
        "FunctionCallReward",
        "CustomReward",
        "GradeResult",
        "grade",
        "agrade",
        "grade_batch",
        "agrade_batch",
        "reward_spec_from_ground_truth",
        "extract_code",
        "ReplayRecorder",
        "replay",
    }
    assert expected <= set(grading.__all__)


@pytest.mark.parametrize("module_name", MODULES)
def test_doctests(module_name: str) -> None:
    module = importlib.import_module(module_name)
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failures == 0
    assert tried > 0, f"{module_name} has no examples"


@pytest.mark.parametrize(
    ("sync", "async_"),
    [(grading.grade, grading.agrade), (grading.grade_batch, grading.agrade_batch)],
)
def test_sync_and_async_signatures_match(sync: object, async_: object) -> None:
    assert inspect.signature(sync) == inspect.signature(async_)  # type: ignore[arg-type]
    assert inspect.iscoroutinefunction(async_)
