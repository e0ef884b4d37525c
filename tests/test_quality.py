"""The code base stays ruff- and mypy-clean (run as part of the suite, so CI enforces it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (install the `test` extra)")
    return found


def test_ruff_check() -> None:
    proc = subprocess.run(
        [_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = subprocess.run(
        [_tool("ruff"), "format", "--check", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict() -> None:
    proc = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_python_3_10_is_enough() -> None:
    """No syntax, module or member newer than 3.10, the oldest Python the README promises.

    mypy checks the package against 3.10 but not the tests; ``vermin`` reads every file
    (``except*``, ``tomllib``, ``typing.Self``, ``asyncio.timeout`` ...). A use behind a
    version check carries a ``# novm`` comment.
    """
    flags = ["--no-config-file", "--target=3.10-", "--violations", "--no-tips", "-q"]
    flags.append("--eval-annotations")  # annotations are strings here (__future__)
    folders = ["collimate_rl", "collimate_envs", "tests", "benchmarks", "notebooks"]
    proc = subprocess.run(
        [_tool("vermin"), *flags, *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_contracts() -> None:
    """The layer order and the no-circle rule hold ([tool.importlinter] in pyproject.toml)."""
    proc = subprocess.run(
        [_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("contract", "module", "added_import"),
    [
        # a circle between two modules of one package
        ("no-circles", "collimate_rl/wire/_core.py", "import collimate_rl.wire.daemon"),
        # ... hidden behind TYPE_CHECKING (it still counts): replay imports result
        (
            "no-circles",
            "collimate_rl/grading/result.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import collimate_rl.grading.replay",
        ),
        # the wire layer reaching up to the sandbox layer (inside a function: still counts)
        ("layers", "collimate_rl/wire/_transport.py", "def f():\n    import collimate_rl.sandbox"),
        # the node using a client
        ("node-uses-no-client", "collimate_rl/node/sessions.py", "import collimate_rl.wire"),
        # the SDK reaching into the node's internals instead of starting it
        ("node-started-only", "collimate_envs/_backend.py", "import collimate_rl.node.core"),
    ],
)
def test_import_contracts_catch_violations(
    tmp_path: Path, contract: str, module: str, added_import: str
) -> None:
    """Each contract fails on a copy of the code with one offending import added."""
    for package in ("collimate_rl", "collimate_envs"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{added_import}\n", encoding="utf-8")
    proc = subprocess.run(
        [_tool("lint-imports"), "--no-cache", "--contract", contract],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and "BROKEN" in proc.stdout, proc.stdout + proc.stderr
    assert str(tmp_path) in _imported_from(tmp_path), "lint-imports read the wrong copy"


def _imported_from(path: Path) -> str:
    """Where ``collimate_rl`` is imported from with ``path`` first on the path."""
    proc = subprocess.run(
        [sys.executable, "-c", "import collimate_rl; print(collimate_rl.__file__)"],
        cwd=path,
        env={**os.environ, "PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout
