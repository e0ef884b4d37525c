"""The helpers the example scripts import (examples/tiny_lm.py, examples/drafts.py): their doctests."""

from __future__ import annotations

import subprocess
import sys

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
def test_doctests(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "doctest", module],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
