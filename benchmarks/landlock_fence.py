"""What the Landlock fence costs a box: our ctypes calls against the ``landlock`` PyPI bindings.

Each sample is a fresh fork of this (warm) interpreter that applies a fence (read all, write
``/tmp`` and ``/dev``) and exits; its CPU time (``wait4``'s rusage), less a fork that
applies nothing. The two fences take turns. The bindings run where installed
(``pip install landlock``); they cover the filesystem only (no TCP rules, no scoping).

    python benchmarks/landlock_fence.py [--samples 400]
    PYTHONPATH=/path/to/venv-with-landlock/site-packages python benchmarks/landlock_fence.py

>>> _median([3, 1, 2])
2
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from collections.abc import Callable

from collimate_rl.node.runtime._sandbox.landlock import Fence

PATHS = ("/tmp", "/dev")


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _forked(apply: Callable[[], object]) -> float:
    """CPU seconds (user + system) of a fork that applies a fence and exits."""
    pid = os.fork()
    if pid == 0:
        try:
            apply()
        finally:
            os._exit(0)
    _pid, _status, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=400)
    args = parser.parse_args(argv)
    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # no_new_privs, inherited by every fork
    ours = Fence(networked=False)  # built once, as the master does
    runners: dict[str, Callable[[], object]] = {
        "nothing": lambda: None,
        "ours (ctypes, prepared)": lambda: ours.apply(PATHS),
    }
    t0 = time.perf_counter()
    try:
        import landlock  # type: ignore[import-not-found]
    except ImportError:
        landlock = None
    import_ms = (time.perf_counter() - t0) * 1e3
    if landlock is not None:

        def theirs() -> None:
            rules = landlock.Ruleset()
            rules.allow(
                "/",
                rules=landlock.FSAccess.EXECUTE
                | landlock.FSAccess.READ_FILE
                | landlock.FSAccess.READ_DIR,
            )
            rules.allow(*PATHS)
            rules.apply()

        runners["landlock 1.0.0.dev5 (PyPI)"] = theirs
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.samples):
        for name, run in runners.items():  # in turns
            samples[name].append(_forked(run))
    base = _median(samples["nothing"])
    print(
        f"Landlock ABI {ours.abi}; {args.samples} forks each, in turns; python {sys.version.split()[0]}"
    )
    if landlock is not None:
        print(f"import landlock: {import_ms:.1f} ms")
    for name, xs in samples.items():
        print(
            f"{name:32} median CPU of the fork {(_median(xs)) * 1e6:8.0f} us, fence {(_median(xs) - base) * 1e6:6.0f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
