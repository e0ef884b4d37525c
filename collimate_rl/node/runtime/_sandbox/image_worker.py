"""An image worker W of an image's warm fork-server (``warm_image.py``): the harness, warm.

W is a fork of IZ: the image's own Python with the grading harness compiled once. It grades
in-process as a node worker does (``worker_grade.py``; the grade's state, timeout and reply
are ``grade_state.py``'s): a node worker sends it one grade at a time (the environment, seed
and timeout, then the payload) and relays its reply. Trusted test code runs here, in the
image's Python; each candidate is a clone of IZ that W asks for on its link
(:class:`Candidates`). Stdlib only, Python 3.10+ (the image's).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import sys
import time
from typing import Any

from .framing import recv_msg, send_msg, write_all
from .grade_state import grade_reply, grade_state, run_harness
from .hardening import drop_all_capabilities

#: The harness's module name (``collimate_rl.grading._shipping.WARM_MODULE``).
HARNESS = "collimate_harness"


class CandidateRefused(BaseException):
    """IZ could not start a candidate: an infrastructure failure, never a verdict (a
    ``BaseException``, so no ``except Exception`` in the harness or test code folds it in)."""


class Candidates:
    """W's source of candidates for the harness's ``Runner``: clones of IZ (``spawn``)."""

    def __init__(self, link: socket.socket) -> None:
        self.link = link

    def spawn(self, fds: list[int], timeout: float) -> int:
        setup_r, setup_w = os.pipe()
        ready_r, ready_w = os.pipe()
        try:
            self.link.settimeout(max(5.0, min(timeout, 30.0)))
            socket.send_fds(self.link, [b"c"], [*fds, setup_r, ready_w])
            answer = self.link.recv(4096)
        except OSError as exc:
            raise CandidateRefused(f"the image zygote did not answer: {exc}") from None
        finally:
            os.close(setup_r)
            os.close(ready_w)
        try:
            if not answer.isdigit():
                raise CandidateRefused(answer.decode(errors="replace") or "no candidate")
            setup = {"env": dict(os.environ), "seed": os.environ.get("COLLIMATE_SEED", "")}
            with contextlib.suppress(OSError):  # (if it died, its ready pipe says so)
                write_all(setup_w, json.dumps(setup).encode())
            os.close(setup_w)
            setup_w = -1
            said = os.read(ready_r, 4096)
            if said != b"ok":
                why = said.decode(errors="replace").removeprefix("error ") or "it died"
                raise CandidateRefused(f"the candidate did not start: {why}")
            return int(answer)
        finally:
            if setup_w >= 0:
                os.close(setup_w)
            os.close(ready_r)

    def close(self) -> None:
        """Nothing to release: each candidate ends with its pid 1 (the harness kills it)."""


def worker_main(conn_fd: int, link: socket.socket, settings: dict[str, Any]) -> None:
    """W: grade each request on ``conn_fd`` in-process; never returns (exits at EOF)."""
    drop_all_capabilities(int(settings["cap_last"]), bounding=True)  # (IZ's, in its namespace)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    low = 3  # IZ's descriptors (its control socket, the other workers' links) are not W's
    for keep in sorted((conn_fd, link.fileno())):
        os.closerange(low, keep)
        low = keep + 1
    os.closerange(low, 1 << 16)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, conn_fd)
    harness: Any = sys.modules[HARNESS]
    source = Candidates(link)
    at_rest = dict(os.environ)
    while True:
        try:
            header, payload = recv_msg(conn)
        except (EOFError, OSError):
            os._exit(0)
        started = time.monotonic()
        seed, timeout = str(header["seed"]), float(header["timeout"])
        printed = io.StringIO()
        os.environ.clear()
        os.environ.update(header["env"])
        try:
            grade = json.loads(bytes(payload))
            del payload
            with grade_state(seed, printed):
                with contextlib.suppress(OSError):
                    os.chdir(settings["workdir"])
                frame = run_harness(harness, grade, source, seed, timeout, started)
            reply, output = grade_reply(harness, grade["nonce"], frame, printed, timeout, started)
        except CandidateRefused as exc:
            reply, output = {"ok": False, "error": str(exc)}, b""
        except Exception as exc:  # a payload W cannot read: not the candidate's doing
            reply, output = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, b""
        finally:
            os.environ.clear()
            os.environ.update(at_rest)
        try:
            send_msg(conn, dict(reply, id=header.get("id")), output)
        except OSError:
            os._exit(0)
