"""A worker grades in-process: the node's warm harness, candidates in boxes.

The harness (``collimate_harness``, defined in the master from the node's
files before any session existed, see ``factory.load_warm_modules``) is what
the trusted process T of a grade exec runs. Here the worker runs its
``grade_payload`` directly: the payload arrives on the host connection (no
file, no exec child, no interpreter start), every candidate process is a box
the master clones into the member's session (the factory's spawn protocol on a
box connection), and the verdict line is the reply's output, byte for byte
what T would have printed.

Between grades nothing is kept: the environment, cwd, recursion and integer
digit limits, stdio, the ``SIGALRM`` handler, ``sys.path``, the warnings
filters and the seeding hook are put back; the global ``random`` is seeded
from the exec's seed at the start of each grade, as an exec child seeds it.
The exec's timeout is a ``SIGALRM`` that ends the grade (the exec reply then
says ``timed_out``, as a killed exec's does).
"""

# ruff: noqa: SIM105
from __future__ import annotations

import _signal
import contextlib
import io
import json
import marshal
import os
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .running_exec import format_timeout
from .seeding import apply_python_seed
from .worker_exec import BoxRefused, session_gone

if TYPE_CHECKING:
    import socket

    from .worker_exec import Worker

#: The harness's module name (``collimate_rl.grading._shipping.WARM_MODULE``).
HARNESS = "collimate_harness"
#: Payload kinds a worker grades; anything else (or a build step) goes as an exec.
KINDS = frozenset({"calls", "asserts", "property", "io", "custom"})
#: Payload keys a worker knows (a payload with others needs the exec's own files).
KNOWN_KEYS = frozenset(
    {
        "v",
        "kind",
        "nonce",
        "source",
        "per_test_timeout",
        "budget_seconds",
        "entry",
        "tests",
        "prelude",
        "module",
        "tuples_as_lists",
        "loose_sequences",
        "float_tolerance",
        "setup",
        "blocks",
        "proxied",
        "generator",
        "reference",
        "k",
        "cases",
        "strip_whitespace",
        "script",
        "output_limit",
        "run_limits",
        "stop_on_failure",
    }
)
#: Output trusted test code printed, kept ahead of the verdict (a tail).
MAX_PRINTED = 64 << 10


class GradeTimeout(BaseException):
    """The exec's timeout ended the grade (a BaseException: test code cannot catch it)."""


class BoxSource:
    """Where the harness gets its candidates: boxes in the session, via the master.

    The harness's ``Runner`` only calls :meth:`spawn` and :meth:`close`. A spawn
    the master refuses is an infrastructure failure (``BoxRefused``), never a
    candidate that crashed; there is no fallback to a fresh interpreter here.
    """

    def __init__(self, harness: Any, conn: socket.socket) -> None:
        self.harness = harness
        self.conn: socket.socket | None = conn
        self.program = _entry(harness)
        self.gone = False  # the master said the session went (see ``close``)

    def spawn(self, fds: list[int], timeout: float) -> int:
        if self.conn is None:
            raise BoxRefused("the box connection is closed", False)
        self.conn.settimeout(max(5.0, min(timeout, 30.0)))
        try:
            return int(self.harness._factory_spawn(self.conn, fds, self.program, "candidate"))
        except OSError as exc:
            text = str(exc)
            raise BoxRefused(text, "the session is gone" in text) from None

    def close(self) -> None:
        """Hang up (the master kills what is left); first note whether the session went."""
        if self.conn is not None:
            self.gone = session_gone(self.conn)
            self.conn.close()
            self.conn = None


_ENTRIES: dict[str, bytes] = {}


def _entry(harness: Any) -> bytes:
    """What a candidate box runs: a few bytes entering its warm harness (compiled once)."""
    digest = str(getattr(harness, "WARM_DIGEST", ""))
    program = _ENTRIES.get(digest)
    if program is None:
        program = _ENTRIES[digest] = marshal.dumps(harness._warm_entry())
    return program


def _take_compiled(
    harness: Any, payload: Any, compiled: list[Any], blobs: bytes | bytearray
) -> None:
    """Seed the harness's block cache with the node's compiled test blocks (``workers.py``)."""
    cache = getattr(harness, "_BLOCKS", None)
    if not isinstance(cache, dict) or payload.get("kind") != "asserts":
        return
    at = 0
    try:
        for index, static, size in compiled:
            blob = bytes(blobs[at : at + size])
            at += size
            source = payload["blocks"][index]["code"]
            if (source, index) not in cache:
                cache[(source, index)] = (marshal.loads(blob), int(static))
    except (ValueError, TypeError, KeyError, IndexError, EOFError):
        return  # the harness compiles what it lacks


def supported(harness: Any, payload: Any) -> bool:
    """Whether the worker can grade ``payload`` (else it goes to the session as an exec)."""
    return (
        harness is not None
        and callable(getattr(harness, "grade_payload", None))
        and isinstance(payload, dict)
        and payload.get("kind") in KINDS
        and set(payload) <= KNOWN_KEYS
    )


def run_grade(
    worker: Worker, header: dict[str, Any], payload_bytes: bytes | bytearray
) -> tuple[dict[str, Any], bytes]:
    """Grade one payload for session ``header["session"]``; the exec-shaped reply."""
    harness = sys.modules.get(HARNESS)
    size = int(header.get("payload_size", len(payload_bytes)))
    try:
        payload = json.loads(bytes(payload_bytes[:size]))
    except ValueError:
        payload = None
    if harness is None or not supported(harness, payload):
        return {"ok": False, "fallback": True}, b""
    _take_compiled(harness, payload, header.get("compiled") or [], payload_bytes[size:])
    started = time.monotonic()
    seed = str(header["seed"])
    timeout = float(header["timeout"])
    printed = io.StringIO()
    frame: dict[str, Any] | None = None
    env = worker.exec_env(seed, header.get("env") or [])
    with worker.environ.changed_to(env), _grade_state(seed, printed):
        conn = worker.connect(str(header["session"]))
        source = BoxSource(harness, conn)
        try:
            signal.setitimer(signal.ITIMER_REAL, max(timeout, 0.001))
            try:
                frame = harness.grade_payload(payload, source, seed, started)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            source.close()
            if source.gone:
                raise BoxRefused("the session is gone", True)
        except GradeTimeout:
            pass
        except BoxRefused as exc:
            return {"ok": False, "error": str(exc), "lost": exc.lost}, b""
        finally:
            source.close()
    before = printed.getvalue()[-MAX_PRINTED:].encode("utf-8", "replace")
    elapsed = round((time.monotonic() - started) * 1000.0, 3)
    if frame is None:
        output = before + (b"\n" if before and not before.endswith(b"\n") else b"")
        return _reply(-1, elapsed, True), output + format_timeout(timeout)
    return _reply(0, elapsed, False), before + harness.frame_line(payload["nonce"], frame)


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
def _grade_state(seed: str, printed: io.StringIO) -> Iterator[None]:
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
