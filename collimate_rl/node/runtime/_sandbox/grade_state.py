"""One in-process grade's process state, its timeout and its reply (a worker's, or an
image worker's: ``worker_grade.py``, ``warm_image.py``).

The harness's ``grade_payload`` runs in a long-lived trusted process; between grades
nothing may be kept: the cwd, recursion and integer digit limits, stdio, the ``SIGALRM``
handler, ``sys.path``, the warnings filters and the seeding hook are put back (the caller
puts back the environment); the global ``random`` is seeded from the grade's seed, as an
exec child seeds it. The grade's timeout is a ``SIGALRM`` that ends it; the reply then
says ``timed_out``, as a killed exec's does.

Stdlib only (an image worker runs it in the image's Python).

>>> reply, output = grade_reply(None, "n", None, io.StringIO("hi"), 2.0, 0.0)
>>> reply["timed_out"], output
(True, b'hi\\ntimeout after 2.0s')
"""

# ruff: noqa: SIM105
from __future__ import annotations

import _signal
import contextlib
import io
import os
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

from .running_exec import format_timeout
from .seeding import apply_python_seed

#: Output trusted test code printed, kept ahead of the verdict (a tail).
MAX_PRINTED = 64 << 10


class GradeTimeout(BaseException):
    """The exec's timeout ended the grade (a BaseException: test code cannot catch it)."""


def run_harness(
    harness: Any, payload: Any, source: Any, seed: str, timeout: float, started: float
) -> dict[str, Any] | None:
    """``harness.grade_payload`` under the grade's timeout: its frame, ``None`` if it ran out.

    Call it inside :func:`grade_state`. Exceptions of ``source`` (an infrastructure failure)
    go through.
    """
    try:
        signal.setitimer(signal.ITIMER_REAL, max(timeout, 0.001))
        try:
            frame: dict[str, Any] = harness.grade_payload(payload, source, seed, started)
            return frame
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except GradeTimeout:
        return None


def grade_reply(
    harness: Any,
    nonce: str,
    frame: dict[str, Any] | None,
    printed: io.StringIO,
    timeout: float,
    started: float,
) -> tuple[dict[str, Any], bytes]:
    """The exec-shaped reply of a grade: what test code printed, then the verdict line (or
    the timeout line when ``frame`` is ``None``)."""
    before = printed.getvalue()[-MAX_PRINTED:].encode("utf-8", "replace")
    elapsed = round((time.monotonic() - started) * 1000.0, 3)
    if frame is None:
        output = before + (b"\n" if before and not before.endswith(b"\n") else b"")
        return _reply(-1, elapsed, True), output + format_timeout(timeout)
    return _reply(0, elapsed, False), before + harness.frame_line(nonce, frame)


def _reply(exit_code: int, elapsed_ms: float, timed_out: bool) -> dict[str, Any]:
    return {
        "ok": True,
        "exit_code": exit_code,
        "exec_time_ms": elapsed_ms,
        "timed_out": timed_out,
        "truncated": False,
        "seed_ack": "verified",  # this process applied the seed (``_grade_state``)
    }


def _on_alarm(*_: Any) -> None:
    raise GradeTimeout


@contextlib.contextmanager
def grade_state(seed: str, printed: io.StringIO) -> Iterator[None]:
    """One grade's process state but its environment, and everything put back after it."""
    saved_path = list(sys.path)
    saved_meta = list(sys.meta_path)
    saved_warnings = warnings.catch_warnings()
    saved_warnings.__enter__()
    saved_limits = (sys.getrecursionlimit(), _int_digits())
    saved_stdio = (sys.stdin, sys.stdout, sys.stderr)
    saved_alarm = _signal.signal(signal.SIGALRM, _on_alarm)
    saved_umask = os.umask(0o022)
    sys.stdout = sys.stderr = printed
    sys.stdin = io.StringIO()
    apply_python_seed(seed)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _signal.signal(signal.SIGALRM, saved_alarm)
        sys.stdin, sys.stdout, sys.stderr = saved_stdio
        sys.path[:] = saved_path
        sys.meta_path[:] = saved_meta
        saved_warnings.__exit__(None, None, None)
        sys.setrecursionlimit(saved_limits[0])
        _set_int_digits(saved_limits[1])
        os.umask(saved_umask)
        try:
            os.chdir("/")
        except OSError:
            pass


def _int_digits() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)
    return int(get()) if get is not None else 0


def _set_int_digits(value: int) -> None:
    set_ = getattr(sys, "set_int_max_str_digits", None)
    if set_ is not None:
        set_(value)
