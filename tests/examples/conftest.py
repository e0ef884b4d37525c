"""Running the scripts of examples/ as a user would: a fresh interpreter, their own local node.

Each example starts the embedded local node on first use (nothing in ``COLLIMATE_*`` is
passed on), writes what it measured to ``--report`` as JSON, and exits 0.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: Each example's own limit; the issue's budget is 2 minutes in CI.
EXAMPLE_TIMEOUT_SECONDS = 240


def needs(*modules: str, install: str) -> pytest.MarkDecorator:
    """Skip (saying how to install them) unless every module imports."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}: {install}")


def run_example(
    script: str,
    tmp_path: Path,
    *args: str,
    python: Path | None = None,
    pythonpath: Path | None = None,
) -> dict[str, Any]:
    """Run ``examples/<script> --report FILE *args``; the report it wrote.

    ``python``: another interpreter (the verl venv's); ``pythonpath``: put first on its path.
    """
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIMATE_")}
    env["PYTHONUNBUFFERED"] = "1"
    # torch's compile caches go to /tmp/torchinductor_<user> unless told: the test's folder
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "torchinductor")
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run(
        [str(python or sys.executable), str(EXAMPLES / script), "--report", str(report), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_SECONDS,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{script} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
            f"\n--- stderr\n{proc.stderr[-4000:]}"
        )
    data: dict[str, Any] = json.loads(report.read_text())
    data["stdout"] = proc.stdout
    return data


def assert_real_rewards(rewards: list[Any], group_size: int) -> None:
    """Every reward a finite number in [0, 1]; some group's rewards differ."""
    assert rewards, "no rewards"
    for reward in rewards:
        assert isinstance(reward, float) and 0.0 <= reward <= 1.0, rewards
    groups = [rewards[i : i + group_size] for i in range(0, len(rewards), group_size)]
    assert any(len(set(group)) > 1 for group in groups), f"no group's rewards vary: {groups}"
