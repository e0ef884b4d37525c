"""``collimate paths``: what a trainer's config is given loads our reward the trainer's way."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from collimate_rl.cli import main


def test_verl_path_loads_compute_score_as_verl_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["paths", "verl"]) == 0
    path = capsys.readouterr().out.strip()
    # verl's load_module: a module from the file, under a name of its own
    spec = importlib.util.spec_from_file_location("custom_module_collimate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.compute_score) and callable(module.compute_score_batch)


def test_slime_path_loads_the_hook_as_slime_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["paths", "slime"]) == 0
    dotted = capsys.readouterr().out.strip()
    # slime's load_function: rpartition(".") then import_module and getattr
    module, _, name = dotted.rpartition(".")
    from collimate_rl.slime import reward_func

    assert getattr(importlib.import_module(module), name) is reward_func


def test_an_unknown_framework_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["paths", "openrlhf"]) == 2
    assert "invalid choice" in capsys.readouterr().err
