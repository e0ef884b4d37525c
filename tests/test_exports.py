"""The public surface: every exported name exists, every public module declares ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import collimate_envs
import collimate_rl

PACKAGES = (collimate_rl, collimate_envs)


def _public_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            parts = info.name.split(".")
            # Private modules, the in-sandbox programs and optional adapters are skipped.
            if any(p.startswith("_") for p in parts[1:]):
                continue
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_all_names_exist(package: object) -> None:
    for name in package.__all__:  # type: ignore[attr-defined]
        assert getattr(package, name) is not None, name


@pytest.mark.parametrize("module_name", _public_modules())
def test_public_modules_declare_all(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # an adapter whose framework is not installed
        pytest.skip(f"{module_name}: {exc}")
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"


def test_top_level_surface() -> None:
    expected = {
        "connect",
        "CollimateClient",
        "GatewayClient",
        "Sandbox",
        "grade",
        "grade_batch",
        "UnitTestReward",
        "PropertyReward",
        "GradeResult",
        "CollimateError",
        "CollimateTaskError",
        "group_seeds",
        "extract_code",
    }
    assert expected <= set(collimate_rl.__all__)
