"""What one call to a candidate costs the harness (T) and the candidate (C), against a bare echo.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/call_exchange.py [--calls 5000] [--rounds 3]

Two processes, no sandbox, one core's worth of work at a time, in turns each round:

* ``echo``: a bare round trip over a socket pair: T sends a small message and waits for it
  to come back (``poll``, then ``recv``); C echoes it. The syscalls and the two wake-ups a
  call cannot do without, and the least Python around them.
* ``harness``: the harness's own path, ``Runner.call("add", (i, 2))`` against a candidate
  process running the shipped child part (forked here instead of cloned in a box): the
  request encoded and framed, the answer parsed and its value decoded on T's side; on C's,
  the request read, the function called, the value encoded and written back.

Each prints, per call, the wall time and the CPU of T and of C (``/proc``). What the harness
spends beyond the echo is the per-call Python a native exchange could remove, the last lever
issue 14 listed; run it against another checkout with ``PYTHONPATH=<checkout>``.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import sys
import time
from collections.abc import Callable

from _proc import usage


def _forked(serve: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            serve()
        finally:
            os._exit(0)
    return pid


#: The size of the framed call request ``Runner.call("add", (i, 2))`` sends (90 bytes).
_MESSAGE = b"\x00\x00\x00\x56" + b"x" * 86


class _Echo:
    """A bare round trip: T's end of a socket pair, a forked C that echoes."""

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair()

        def echo() -> None:
            self.sock.close()
            while data := theirs.recv(65536):
                theirs.sendall(data)

        self.pid = _forked(echo)
        theirs.close()
        self.poller = select.poll()
        self.poller.register(self.sock.fileno(), select.POLLIN)

    def call(self, i: int) -> None:
        self.sock.send(_MESSAGE)
        self.poller.poll(1000)
        self.sock.recv(65536)

    def close(self) -> None:
        self.sock.close()
        os.waitpid(self.pid, 0)


class _Harness:
    """The harness's ``Runner`` against a candidate process running the shipped child part."""

    def __init__(self) -> None:
        from collimate_rl.grading import _child
        from collimate_rl.grading._harness import Runner

        class Forks:  # the zygote's one job, without a box
            def spawn(self, fds: list[int], timeout: float) -> int:
                return _forked(lambda: _child._candidate_main(fds))

        source = "def add(a, b):\n    return a + b\n"
        self.runner = Runner(Forks(), {"source": source}, time.monotonic() + 3600)  # type: ignore[arg-type]
        self.call(0)  # the load, and the first call
        assert self.runner.child is not None
        self.pid = self.runner.child.pid

    def call(self, i: int) -> None:
        reply = self.runner.call("add", (i, 2))
        if reply.value != i + 2:
            raise SystemExit(f"the candidate answered {reply.__dict__}")

    def close(self) -> None:
        self.runner.close()
        os.waitpid(self.pid, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ways = {"echo": _Echo(), "harness": _Harness()}
    try:
        for round_ in range(1, args.rounds + 1):
            for name, way in ways.items():
                c0, t0, w0 = usage(way.pid)[0], time.thread_time(), time.perf_counter()
                for i in range(args.calls):
                    way.call(i)
                us = 1e6 / args.calls
                wall, t_cpu = (time.perf_counter() - w0) * us, (time.thread_time() - t0) * us
                c_cpu = (usage(way.pid)[0] - c0) * 1000 / args.calls
                print(
                    f"round {round_}  {name:<8} per call: wall {wall:4.0f} us, "
                    f"T {t_cpu:3.0f} us, C {c_cpu:3.0f} us, both {t_cpu + c_cpu:4.0f} us",
                    flush=True,
                )
    finally:
        for way in ways.values():
            way.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
