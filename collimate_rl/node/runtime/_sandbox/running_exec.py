"""One exec in flight, as its session server tracks it: output, deadline, result.

>>> import os, socket
>>> r, w = os.pipe()
>>> os.write(w, b"hi"); os.close(w)
2
>>> ex = RunningExec(0, socket.socket(socket.AF_UNIX), r, -1, seed="0" * 64, timeout=1.0, cap=1 << 20)
>>> ex.read_output(), bytes(ex.output)
(False, b'hi')
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any


def format_timeout(seconds: float) -> bytes:
    """The line a timed-out exec's output ends with.

    >>> format_timeout(2)
    b'timeout after 2.0s'
    """
    return f"timeout after {float(seconds)}s".encode()


class RunningExec:
    """An exec child's pid, its reply connection (a session server's), output and seed-ack pipes."""

    def __init__(
        self,
        pid: int,
        conn: socket.socket | None,
        out_r: int,
        ack_r: int,
        *,
        seed: str,
        timeout: float,
        cap: int,
    ) -> None:
        self.pid = pid
        self.conn = conn
        self.out_r = out_r
        self.ack_r = ack_r
        self.seed = seed
        self.timeout = timeout
        self.cap = cap
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        self.output = bytearray()
        self.timed_out = False
        self.truncated = False
        self.status: int | None = None
        self.cancelled = False
        self.t_end = 0.0
        self.out_open = True

    @property
    def sock(self) -> socket.socket:
        """The connection to reply on (a session server's execs always have one)."""
        assert self.conn is not None
        return self.conn

    def kill(self) -> None:
        """SIGKILL the exec's process group and the exec child."""
        if self.pid <= 0:  # (not started; never pid 0: that would be our own group)
            return
        for fn, target in ((os.killpg, self.pid), (os.kill, self.pid)):
            try:
                fn(target, signal.SIGKILL)
            except OSError:
                pass

    def read_output(self) -> bool:
        """Read what is available; False on EOF or at the cap (which kills the exec)."""
        while True:
            try:
                chunk = os.read(self.out_r, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return True
            if not chunk:
                return False
            room = self.cap - len(self.output)
            if len(chunk) > room:
                self.output += chunk[:room]
                if not self.truncated:
                    self.truncated = True
                    self.kill()
                return False
            self.output += chunk

    def result(self, ack: str) -> tuple[dict[str, Any], bytes]:
        """The reply header and merged output, once the exec child was reaped."""
        assert self.status is not None
        if self.timed_out:
            code = -1
            if self.output and not self.output.endswith(b"\n"):
                self.output += b"\n"
            self.output += format_timeout(self.timeout)
        else:
            code = os.waitstatus_to_exitcode(self.status)
        header = {
            "ok": True,
            "exit_code": code,
            "exec_time_ms": round((self.t_end - self.t0) * 1000.0, 3),
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "seed_ack": "verified" if ack == self.seed else "no-ack",
        }
        return header, bytes(self.output)
