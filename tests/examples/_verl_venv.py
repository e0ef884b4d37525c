"""A venv with verl's reward path at verl's own pins, built once per machine for the verl example.

verl 0.9.1 pins ``transformers<5.11`` and ``tensordict<=0.10`` (the examples extra has
transformers 5.25) and installs a top-level ``tests`` package that would shadow ours, so
its example runs in a venv of its own: ``pip install --no-deps verl`` plus what its reward
path imports, our package's dependencies (``.[node]``), and our source on ``PYTHONPATH``.
The venv lives in ``$COLLIMATE_TEST_VERL_VENV`` (default under /var/tmp), named by a hash
of the requirements, so a changed pin builds a new one; a lock keeps two runs from
building it at once. ``verl_python()`` returns its interpreter, or raises
:class:`VenvUnavailable` saying why (pip's own words).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: verl and the packages its reward path imports, at verl's pins (torch: the CPU build on disk).
VERL = "verl==0.9.1"
REQUIREMENTS = (
    "torch==2.13.0",
    "transformers==5.10.4",
    "tensordict==0.10.0",
    "codetiming",
    "hydra-core",
    "omegaconf",
    "pandas",
    "pyarrow",
    "ray",
    "pylatexenc",
    "dill",
)
PIP_TIMEOUT_SECONDS = 1200


class VenvUnavailable(RuntimeError):
    """The verl venv could not be built (no registry, a pin that no longer resolves)."""


def venv_dir() -> Path:
    key = hashlib.sha256(" ".join((VERL, *REQUIREMENTS)).encode()).hexdigest()[:12]
    root = Path(os.environ.get("COLLIMATE_TEST_VERL_VENV", "/var/tmp/collimate-test-verl-venv"))
    return root / key


def _run(argv: list[str]) -> None:
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS, check=False
    )
    if proc.returncode != 0:
        raise VenvUnavailable(f"{' '.join(argv[:4])} ... failed:\n{proc.stderr[-2000:]}")


def verl_python() -> Path:
    """The verl venv's interpreter, building the venv first if this machine has none."""
    target = venv_dir()
    python = target / "bin" / "python"
    done = target / ".complete"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / (target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return python
        _run([sys.executable, "-m", "venv", "--clear", str(target)])
        pip = [str(python), "-m", "pip", "install", "-q"]
        _run([*pip, *REQUIREMENTS, f"{REPO}[node]"])
        _run([*pip, "--no-deps", VERL])
        done.write_text("ok\n")
    return python
