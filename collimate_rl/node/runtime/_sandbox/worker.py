"""A template's worker W: grades and light-session execs, for one host connection.

The master forks a worker when the host asks for one (``{"op": "worker"}``), a
pristine fork: it never received a request. The worker binds ``w<id>.sock`` in
the host-shared socket folder, then hardens itself: ``/.collimate`` covered in a
private mount namespace, every capability dropped (bounding set too),
``no_new_privs``, non-dumpable, and the seccomp filter that also refuses
``fork``, ``clone`` and ``execve`` (``build_seccomp_filter(no_spawn=True)``): a
worker never starts a process, it asks the master for boxes. It accepts one
connection (the host's, kept for the worker's life: no set-up per request) and
serves frames (``framing.py``) one at a time:

* ``{"op": "exec", "session", <the exec header a session server gets>}`` +
  payload: runs the exec in an exec box (``worker_exec.py``);
* ``{"op": "grade", "session", "seed", "timeout", "env"}`` + the grading
  payload: grades in-process with the node's warm harness, its candidates in
  candidate boxes (``worker_grade.py``).

Replies: ``{"ok": true, "exit_code", "exec_time_ms", "timed_out", "truncated",
"seed_ack"}`` + the output, as a session server's; ``{"ok": false, "error",
"lost"}`` for an infrastructure failure (``lost``: the session is gone); or
``{"ok": false, "fallback": true}`` when a grade's payload needs what only an
exec in the session has (nothing ran: send it as an exec).

The worker exits when the host hangs up or its master connection closes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any

from .common import close_other_fds, fork_until_ready, log_exception, say_start_failed
from .environ import EnvironAtRest, template_env
from .framing import recv_msg, send_msg
from .hardening import hide_internals_and_drop_capabilities
from .layout import ZYGOTE_ENV
from .seccomp import build_seccomp_filter, load_seccomp
from .syscalls import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl, set_name
from .worker_exec import run_exec
from .worker_grade import run_grade


class Worker:
    """A worker's state: its config, its master control socket, its host connection."""

    def __init__(self, cfg: dict[str, Any], ctl: socket.socket, cap_last: int) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.cap_last = cap_last
        # between grades: what every exec's environment starts from (a grade changes ~2)
        self.environ = EnvironAtRest(template_env(cfg))

    def connect(self, key: str) -> socket.socket:
        """A new box connection to the master, bound to session ``key`` (see ``boxes.py``)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            request = json.dumps({"op": "connect", "session": key}).encode()
            socket.send_fds(self.ctl, [request], [theirs.fileno()])
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        return mine

    def exec_env(self, seed: str, env: list[list[str]]) -> dict[str, str]:
        """The environment an exec of the session would run with (never the factory's fd)."""
        out = dict(self.environ.env)
        out.update({k: v for k, v in env})
        out.pop(ZYGOTE_ENV, None)
        out["COLLIMATE_SEED"] = seed
        return out

    def serve(self, conn: socket.socket) -> None:  # pragma: no cover - in the worker
        while True:
            try:
                header, payload = recv_msg(conn)
            except (EOFError, OSError):
                return
            op = header.get("op")
            try:
                if op == "exec":
                    reply, output = run_exec(self, header, payload)
                elif op == "grade":
                    reply, output = run_grade(self, header, payload)
                else:
                    reply, output = {"ok": False, "error": f"unknown op {op!r}"}, b""
            except Exception as exc:
                log_exception("worker request")
                reply, output = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, b""
            del payload
            try:
                send_msg(conn, reply, output)
            except OSError:
                return


def start_worker(
    cfg: dict[str, Any], sock_dir: str, wid: int, cap_last: int
) -> tuple[int, socket.socket]:
    """Fork worker ``wid``; returns its pid and the master's end of its control socket.

    Returns once the worker listens (hardened) on ``<sock_dir>/w<wid>.sock``.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def worker(ready_w: int) -> None:  # pragma: no cover - the worker
        ours.detach()
        _worker_main(cfg, sock_dir, wid, cap_last, theirs, ready_w)

    try:
        pid = fork_until_ready(worker, "worker")
    except OSError:
        ours.close()
        raise
    finally:
        theirs.close()
    return pid, ours


def _worker_main(
    cfg: dict[str, Any],
    sock_dir: str,
    wid: int,
    cap_last: int,
    ctl: socket.socket,
    ready_w: int,
) -> None:  # pragma: no cover - the worker; never returns
    try:
        set_name(f"col-worker-{wid}")
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # nothing of the master's may stay open here: namespaces, sessions, sockets
        close_other_fds({0, 1, 2, ctl.fileno(), ready_w})
        path = os.path.join(sock_dir, f"w{wid}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        hide_internals_and_drop_capabilities(cap_last, bounding=True)
        prctl(PR_SET_DUMPABLE, 0)
        load_seccomp(build_seccomp_filter(no_spawn=True))
        os.chdir("/")
        worker = Worker(cfg, ctl, cap_last)
        os.write(ready_w, b"ok")
        os.close(ready_w)
    except BaseException as exc:
        say_start_failed(ready_w, exc)
    try:
        conn, _ = listener.accept()
        listener.close()
        worker.serve(conn)
    except BaseException:
        log_exception("worker")
    finally:
        sys.stderr.flush()
        os._exit(0)
