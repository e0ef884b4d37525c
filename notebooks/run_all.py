"""Regenerate the committed outputs of the notebooks: execute each one and write it back.

Usage (from anywhere; needs the ``notebooks`` and ``node`` extras)::

    .venv/bin/python notebooks/run_all.py            # every notebook
    .venv/bin/python notebooks/run_all.py 05 06      # the notebooks whose names start so

Each notebook runs top to bottom in a fresh kernel of this interpreter, in a scratch working
directory (files a notebook writes do not land in the repository), with matplotlib's inline
backend, so the committed notebooks carry their pictures as PNG outputs a code host can show.
A notebook that fails is left as it was, the error is printed, and the exit status is 1;
the others are still written. Per-notebook wall times are printed at the end.

The test suite executes the notebooks with :func:`execute` too, on copies and headless
(``MPLBACKEND=Agg``), and never rewrites the committed files.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import nbclient
import nbformat

NOTEBOOK_DIR = Path(__file__).resolve().parent
#: Seconds one cell may run before the execution fails.
CELL_TIMEOUT_SECONDS = 600


def notebooks(prefixes: Sequence[str] = ()) -> list[Path]:
    """The notebooks in this folder, in name order; only those starting with a prefix, if given."""
    found = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    if prefixes:
        found = [p for p in found if p.name.startswith(tuple(prefixes))]
    return found


def execute(
    path: Path, *, workdir: Path, env: Mapping[str, str] | None = None
) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` in memory and return it with its outputs.

    The file is not modified. The kernel runs this interpreter, with ``workdir`` as its working
    directory and ``env`` as its environment (default: this process's).

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised (the message shows the cell).
    """
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        book,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        record_timing=False,  # wall-clock stamps would make every regeneration a diff
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute(env=dict(env if env is not None else os.environ))
    return book


def regenerate(paths: Sequence[Path]) -> dict[Path, float | BaseException]:
    """Execute each notebook with the inline backend and write it back if it ran through.

    Returns:
        For each notebook, its wall time in seconds, or the exception that stopped it.
    """
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the kernel's default: matplotlib-inline, PNGs in the outputs
    outcome: dict[Path, float | BaseException] = {}
    for path in paths:
        print(f"{path.name}: running", flush=True)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="collimate-notebook-") as scratch:
            try:
                book = execute(path, workdir=Path(scratch), env=env)
            except Exception as exc:  # report it, keep the committed notebook, go on
                outcome[path] = exc
                print(f"{path.name}: FAILED\n{exc}", file=sys.stderr, flush=True)
                continue
        nbformat.write(book, path)
        outcome[path] = time.perf_counter() - start
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "prefixes", nargs="*", help="run only the notebooks whose file names start so"
    )
    args = parser.parse_args(argv)
    paths = notebooks(args.prefixes)
    if not paths:
        parser.error(f"no notebook in {NOTEBOOK_DIR} starts with {args.prefixes}")
    outcome = regenerate(paths)
    for path, result in outcome.items():
        status = f"{result:6.1f} s" if isinstance(result, float) else "FAILED"
        print(f"{status}  {path.name}")
    return 1 if any(isinstance(r, BaseException) for r in outcome.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
