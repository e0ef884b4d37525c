"""The post-exec sweep: the session server (pid 1) kills whatever an exec left behind.

Every process of the session dies but the server, the factory F, the
service keeper's process session and the egress relay R; the sweep waits
(bounded) until they are gone, so the next exec starts clean and
RLIMIT_NPROC's count is back to zero.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import signal
import time


class Sweeper:
    """Mixed into :class:`~.session_server.SessionServer`: the post-exec sweep."""

    factory_pid: int
    service_pid: int
    relay_pid: int

    def _factory_died(self) -> None:
        raise NotImplementedError

    def _sweep(self) -> None:
        """Kill every other process of the session (we are pid 1) and reap them.

        Waits (bounded) until they are gone, so the next exec sees a clean
        session and the per-session RLIMIT_NPROC count is back to zero. The
        factory F is spared (and continued, should an exec have stopped it).
        """
        if not self.factory_pid and not self.service_pid and not self.relay_pid:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                return  # ESRCH: nothing else alive
        elif self.factory_pid:  # (never kill(0, ...): that is our own process group)
            try:
                os.kill(self.factory_pid, signal.SIGCONT)
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        while True:
            spared = self.factory_pid or self.service_pid or self.relay_pid
            if spared and not self._kill_all_but_factory():
                return
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == self.factory_pid:  # (a zombie holds its pid until reaped here)
                self._factory_died()
                if not self.service_pid and not self.relay_pid:
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except OSError:
                        pass
            if pid and pid == self.service_pid:
                self.service_pid = 0
            if pid and pid == self.relay_pid:
                self.relay_pid = 0
            if pid == 0:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.0005)

    def _kill_all_but_factory(self) -> bool:
        """SIGKILL every process but us, F, the service and R (``kill(-1)`` would hit them); any left?

        The service is every process of K's process session: an exec cannot
        join it (setsid only creates sessions), a service child that calls
        setsid leaves it and dies here. R never forks.
        """
        keep = (os.getpid(), self.factory_pid, self.relay_pid)
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in keep:
                continue
            if self.service_pid and _session_of(int(name)) == self.service_pid:
                continue
            found = True
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
        return found


def _session_of(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1
