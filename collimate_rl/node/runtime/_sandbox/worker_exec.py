"""A worker runs one exec of a light session: an exec box, its output, its deadline.

The worker asks the master for an exec box bound to the session (``boxes.py``:
a fresh one, or the session's standby one), gets the box's pipes with the
answer, hands it the job (the frame a session server would get) on its job pipe, and
collects the merged output under the cap and the deadline exactly as a session
server does (``running_exec.RunningExec``); the box's init reports the exec's
wait status on the status pipe. At the deadline, or past the output cap, the
worker kills the box's pid 1, which takes every process of the box with it.
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import socket
import sys
import termios
import time
from typing import TYPE_CHECKING, Any

from .framing import frame_bytes
from .running_exec import RunningExec
from .spawned_job import runs_python_here

if TYPE_CHECKING:
    from typing import Protocol

    from .environ import EnvironAtRest

    class Worker(Protocol):
        """What an exec or a grade needs of its worker (``worker.py``, which imports
        this module: a protocol, not an import, keeps the two apart)."""

        cfg: dict[str, Any]
        environ: EnvironAtRest

        def connect(self, key: str) -> socket.socket: ...

        def exec_env(self, seed: str, env: list[list[str]]) -> dict[str, str]: ...


#: How long a box may take to start (the master kills it past its own deadline first).
SPAWN_TIMEOUT = 30.0
#: The exec keys a box's job carries (``exec_child.ExecJob``).
_JOB_KEYS = ("seed", "timeout", "env", "files", "command", "commands", "code")


class BoxRefused(BaseException):
    """The master could not start a box, or the session went while it ran.

    An infrastructure failure, never a verdict: a ``BaseException``, so no
    ``except Exception`` in the harness or in trusted test code turns it into one.
    """

    def __init__(self, error: str, lost: bool) -> None:
        super().__init__(error)
        self.lost = lost


def take_exec_box(conn: socket.socket, spawn: bool) -> tuple[int, list[int]]:
    """Ask the master for an exec box on ``conn``: its pid and the worker's ends of its
    pipes (job, output, seed acknowledgement, status); ``BoxRefused`` if there is none.

    ``spawn``: the job runs a program of its own (a box kept from earlier execs may take it).
    """
    reply, fds = ask_master(conn, {"op": "exec", "spawn": spawn}, 4)
    if not isinstance(reply, dict) or reply.get("ok") is not True or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        error = reply.get("error") if isinstance(reply, dict) else None
        lost = bool(reply.get("lost")) if isinstance(reply, dict) else False
        raise BoxRefused(str(error or "no box"), lost)
    return int(reply["pid"]), fds


def ask_master(conn: socket.socket, request: dict[str, Any], max_fds: int) -> tuple[Any, list[int]]:
    """One request on a box connection: the master's reply and the descriptors with it
    (``BoxRefused`` if it did not answer)."""
    conn.settimeout(SPAWN_TIMEOUT)
    fds: list[int] = []
    try:
        conn.send(json.dumps(request).encode())
        msg, fds, _flags, _addr = socket.recv_fds(conn, 65536, max_fds)
        return json.loads(msg or b"null"), fds
    except (OSError, ValueError) as exc:
        for fd in fds:
            os.close(fd)
        raise BoxRefused(f"the master did not answer: {exc}", False) from None


def session_gone(conn: socket.socket) -> bool:
    """Whether the master said (unasked) that the connection's session is gone.

    A session deleted while one of its boxes runs: the master kills the box and
    tells every connection bound to the session, so its exec or grade ends as
    an infrastructure failure, not as a process the candidate's code killed.
    """
    try:
        conn.setblocking(False)
        said = conn.recv(65536)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    try:
        notice = json.loads(said or b"null")
    except ValueError:
        return True
    return not said or (isinstance(notice, dict) and bool(notice.get("lost")))


def run_exec(
    worker: Worker, header: dict[str, Any], payload: bytes | bytearray
) -> tuple[dict[str, Any], bytes]:
    """Run one exec of session ``header["session"]``; the reply header and the output."""
    conn = worker.connect(str(header["session"]))
    try:
        spawn = not runs_python_here(worker.cfg, header.get("command"), header.get("commands"))
        # the kind goes first: the box's init forks a Python job unread (``box.py``)
        job = (b"s" if spawn else b"f") + frame_bytes(
            {k: header[k] for k in _JOB_KEYS if k in header}, bytes(payload)
        )
        try:
            return _run_in_box(worker, conn, header, job, spawn)
        except JobNotTaken:  # nothing of the exec ran: once more, in a fresh box
            try:
                return _run_in_box(worker, conn, header, job, spawn)
            except JobNotTaken:
                raise BoxRefused("the box died before it took its job", False) from None
    except BoxRefused as exc:
        return {"ok": False, "error": str(exc), "lost": exc.lost}, b""
    finally:
        conn.close()  # the master kills whatever is left of the box


class JobNotTaken(Exception):
    """The box died (killed from outside: a standby box can wait long) before its init
    read the whole job: nothing of the exec ran, so another box may run it."""


def _run_in_box(
    worker: Worker, conn: socket.socket, header: dict[str, Any], job: bytes, spawn: bool
) -> tuple[dict[str, Any], bytes]:
    pid, pipes = take_exec_box(conn, spawn)
    try:
        job_w, out_r, ack_r, st_r = pipes
        cap = int(worker.cfg["limits"]["output_cap_bytes"])
        ex = RunningExec(
            pid,
            None,
            out_r,
            ack_r,
            seed=str(header["seed"]),
            timeout=float(header["timeout"]),
            cap=cap,
        )
        return run_job(conn, ex, job, job_w, st_r)
    finally:
        for fd in pipes:
            os.close(fd)


def run_job(
    conn: socket.socket, ex: RunningExec, job: bytes, job_w: int, st_r: int
) -> tuple[dict[str, Any], bytes]:
    """Feed a box (or an image zygote job) its job, supervise it, and answer as an exec.

    Raises ``BoxRefused`` (the box could not start, or the session went) and
    ``JobNotTaken`` (it died before it read the whole job: nothing ran).
    """
    status = _supervise(ex, job, job_w, st_r)
    if session_gone(conn):
        raise BoxRefused("the session is gone", True)
    ex.status = status
    ex.t_end = time.monotonic()
    try:
        ack = os.read(ex.ack_r, 256).decode(errors="replace")
    except OSError:
        ack = ""
    return ex.result(ack)


def _supervise(ex: RunningExec, job: bytes, job_w: int, st_r: int) -> int:
    """Feed the job, collect output, enforce the deadline; the exec's wait status."""
    for fd in (job_w, ex.out_r, st_r, ex.ack_r):
        os.set_blocking(fd, False)
    sel = selectors.DefaultSelector()
    view = _write_some(job_w, memoryview(job))  # most jobs fit in the pipe: no select for them
    if view:
        sel.register(job_w, selectors.EVENT_WRITE, "job")
    sel.register(ex.out_r, selectors.EVENT_READ, "out")
    sel.register(st_r, selectors.EVENT_READ, "status")
    said = bytearray()
    status_open = True
    try:
        while ex.out_open or status_open:
            timeout = None if ex.timed_out else max(0.0, ex.deadline - time.monotonic())
            events = sel.select(timeout)
            for key, _ in events:
                if key.data == "job":
                    view = _feed(sel, job_w, view)
                elif key.data == "out":
                    if not ex.read_output():
                        ex.out_open = False
                        sel.unregister(ex.out_r)
                else:
                    chunk = _read(st_r)
                    if chunk:
                        said += chunk
                    elif chunk is not None:
                        status_open = False
                        sel.unregister(st_r)
            if not ex.timed_out and time.monotonic() >= ex.deadline:
                ex.timed_out = True
                ex.kill()
    finally:
        sel.close()
    if said.startswith(b"error "):  # the box could not set itself up: not the exec's doing
        raise BoxRefused(f"the box did not start: {said[6:].decode(errors='replace')}", False)
    if not said and not ex.timed_out and (view is None or view or _unread(job_w)):
        raise JobNotTaken  # (None: the pipe had no reader left for the job)
    try:
        return int(said)
    except ValueError:  # killed (deadline, cap, a cancelled exec) before it could say
        return signal.SIGKILL


def _feed(sel: selectors.BaseSelector, job_w: int, view: memoryview | None) -> memoryview | None:
    left = _write_some(job_w, view)
    if not left:
        sel.unregister(job_w)
    return left


def _write_some(job_w: int, view: memoryview | None) -> memoryview | None:
    """Write what the job pipe takes now; what is left of the job (None: the box is gone)."""
    if not view:
        return view
    try:
        return view[os.write(job_w, view[: 1 << 16]) :]
    except (BlockingIOError, InterruptedError):
        return view
    except OSError:  # EPIPE: its status (or its silence) says why
        return None


def _unread(fd: int) -> int:
    """Bytes written to pipe ``fd`` that nobody read yet."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, bytes(4)), sys.byteorder)


def _read(fd: int) -> bytes | None:
    try:
        return os.read(fd, 64)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""
