"""A worker grades for an image template: on an image worker of the image's own Python.

An image template's grade must run the image's ``python3`` (its version, its packages),
so the worker does not grade in-process (``worker_grade.py``). It asks the master for an
image worker W of the template's warm fork-server (``image_zygote.py``, ``warm_image.py``):
the image's Python with the harness loaded, grading in-process as this worker would, its
candidates clones of the fork-server in namespaces and a copy-on-write root of their own.
The worker sends W the grade (the environment, seed and timeout, and the payload) and
relays its reply. W ends the grade at its timeout itself; if it does not answer well
after that, the worker kills it through its pidfd and the grade ends as a timed-out exec.

When the master says ``fallback`` (the session's files are not the template's, or the
image's Python cannot serve), the reply says so and the node runs the grade as an exec:
the full harness in a cold ``python3`` of the image, in the session's files.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from .common import kill_pidfd
from .framing import recv_msg, send_msg
from .running_exec import format_timeout
from .worker_exec import BoxRefused, ask_master, session_gone

if TYPE_CHECKING:
    from .worker_exec import Worker

#: How long past the grade's timeout W may take to answer before it is killed.
ANSWER_GRACE = 10.0


def take_image_worker(conn: socket.socket) -> tuple[socket.socket, int] | None:
    """Ask the master for an image worker: its socket and pidfd; ``None``: fall back."""
    reply, fds = ask_master(conn, {"op": "warm-image"}, 2)
    if isinstance(reply, dict) and reply.get("ok") is True and len(fds) == 2:
        return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fds[0]), fds[1]
    for fd in fds:
        os.close(fd)
    if isinstance(reply, dict) and reply.get("fallback"):
        return None
    lost = bool(reply.get("lost")) if isinstance(reply, dict) else False
    raise BoxRefused(str(reply.get("error") if isinstance(reply, dict) else "no worker"), lost)


def run_image_grade(
    worker: Worker, header: dict[str, Any], payload: bytes | bytearray
) -> tuple[dict[str, Any], bytes]:
    """Grade one payload of session ``header["session"]`` on an image worker."""
    size = int(header.get("payload_size", len(payload)))
    seed, timeout = str(header["seed"]), float(header["timeout"])
    conn = worker.connect(str(header["session"]))
    try:
        taken = take_image_worker(conn)
        if taken is None:
            return {"ok": False, "fallback": True}, b""
        sock, pidfd = taken
        try:
            env = worker.exec_env(seed, header.get("env") or [])
            sock.settimeout(timeout + ANSWER_GRACE)
            ask = {"id": os.urandom(8).hex(), "seed": seed, "timeout": timeout, "env": env}
            try:
                send_msg(sock, ask, bytes(payload[:size]))
                reply, output = recv_msg(sock)
                while reply.get("id") != ask["id"]:  # an earlier grade's, never collected
                    reply, output = recv_msg(sock)
            except TimeoutError:  # W is stuck past its own timeout: it goes
                kill_pidfd(pidfd)
                reply = {"ok": True, "exit_code": -1, "exec_time_ms": timeout * 1000.0}
                reply.update(timed_out=True, truncated=False, seed_ack="no-ack")
                output = format_timeout(timeout)
            except (OSError, EOFError) as exc:
                raise BoxRefused(f"the image worker is gone: {exc}", False) from None
        finally:
            sock.close()
            os.close(pidfd)
        if session_gone(conn):
            raise BoxRefused("the session is gone", True)
        if not reply.get("ok"):
            raise BoxRefused(str(reply.get("error") or "the image worker failed"), False)
        return reply, bytes(output)
    except BoxRefused as exc:
        return {"ok": False, "error": str(exc), "lost": exc.lost}, b""
    finally:
        conn.close()  # the master takes its image worker back
