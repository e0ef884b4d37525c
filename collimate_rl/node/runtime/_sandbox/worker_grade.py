"""A worker grades in-process: the node's warm harness, candidates in boxes.

The harness (``collimate_harness``, defined in the master from the node's
files before any session existed, see ``factory.load_warm_modules``) is what
the trusted process T of a grade exec runs. Here the worker runs its
``grade_payload`` directly: the payload arrives on the host connection (no
file, no exec child, no interpreter start), every candidate process is a box
the master clones into the member's session (the factory's spawn protocol on a
box connection), and the verdict line is the reply's output, byte for byte
what T would have printed.

The grade's process state, its timeout and its reply: ``grade_state.py``.
"""

from __future__ import annotations

import io
import json
import marshal
import sys
import time
from typing import TYPE_CHECKING, Any

from .grade_state import grade_reply, grade_state, run_harness
from .worker_exec import BoxRefused, session_gone
from .worker_image_grade import run_image_grade

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
    if worker.cfg.get("image"):  # the image's own Python grades (worker_image_grade.py)
        return run_image_grade(worker, header, payload_bytes)
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
    env = worker.exec_env(seed, header.get("env") or [])
    with worker.environ.changed_to(env), grade_state(seed, printed):
        conn = worker.connect(str(header["session"]))
        source = BoxSource(harness, conn)
        try:
            frame = run_harness(harness, payload, source, seed, timeout, started)
            source.close()
            if source.gone:
                raise BoxRefused("the session is gone", True)
        except BoxRefused as exc:
            return {"ok": False, "error": str(exc), "lost": exc.lost}, b""
        finally:
            source.close()
    return grade_reply(harness, payload["nonce"], frame, printed, timeout, started)
