"""The helpers the example scripts import (examples/tiny_lm.py, examples/drafts.py): their doctests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.conftest import EXAMPLES, needs


@pytest.mark.parametrize(
    "module",
    [
        "drafts.py",
        pytest.param(
            "tiny_lm.py",
            marks=needs("torch", "transformers", install="pip install -e '.[examples]'"),
        ),
    ],
)
def test_doctests(module: str, tmp_path: Path) -> None:
    # torch's compile caches go to /tmp/torchinductor_<user> unless told: the test's folder
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torchinductor"))
    proc = subprocess.run(
        [sys.executable, "-m", "doctest", module],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
