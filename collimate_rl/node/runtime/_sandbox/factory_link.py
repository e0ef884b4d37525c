"""The session server's side of its pristine factory F (see ``factory.py``).

F is forked before the server reads any request, hardened like an exec and
made non-dumpable; each exec gets its own connection to it.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import selectors
import signal
import socket
from typing import Any

from .environ import replace_environ, template_env
from .factory import Factory
from .hardening import apply_limits, hide_internals_and_drop_capabilities
from .landlock import Fence
from .layout import ZYGOTE_ENV
from .seccomp import load_seccomp
from .seeding import apply_python_seed
from .syscalls import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl


class FactoryLink:
    """Mixed into :class:`~.session_server.SessionServer`: starting F and reaching it."""

    cfg: dict[str, Any]
    isolated: bool
    cap_last: int
    seccomp: bytes
    fence: Fence
    sandbox_dir: str
    devnull: int
    base_env: dict[str, str]
    sel: selectors.BaseSelector
    factory_pid: int
    factory_ctl: socket.socket | None
    factory_pending: bool

    def close_fds(self) -> None:
        raise NotImplementedError

    def start_factory(self) -> None:
        """Fork F; only before this server has read any request (F must be pristine).

        Called when the first connection is ready to accept (nothing read yet).

        F is never re-created: a later fork of this server could carry earlier
        requests in its (freed, not zeroed) memory. If F dies, execs get no
        ``COLLIMATE_ZYGOTE_FD`` and callers fall back to a fresh interpreter.
        """
        if not self.isolated or self.factory_pid:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - F
            os.close(ready_r)
            ours.close()
            self._factory_main(theirs, ready_w)
        os.close(ready_w)
        theirs.close()
        try:
            ok = os.read(ready_r, 16) == b"ok"
        finally:
            os.close(ready_r)
        if not ok:
            ours.close()
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return
        ours.setblocking(False)
        self.factory_pid = pid
        self.factory_ctl = ours

    def _factory_main(self, ctl: socket.socket, ready_w: int) -> None:  # pragma: no cover
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            self.close_fds()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            # F keeps 0..3 taken (see factory.Factory._child); both fds are > 4
            os.dup2(ctl.detach(), 3)
            os.set_inheritable(3, False)
            os.closerange(4, ready_w)
            os.closerange(ready_w + 1, 1 << 16)
            hide_internals_and_drop_capabilities(self.cap_last)
            prctl(PR_SET_DUMPABLE, 0)
            self.fence.apply()  # the template's writable_paths
            load_seccomp(self.seccomp)
            os.chdir(self.sandbox_dir)
            factory = Factory(socket.socket(fileno=3), self._prepare_spawned)
            os.write(ready_w, b"ok")
            os.close(ready_w)
        except BaseException:
            os._exit(1)
        try:
            factory.serve()
        finally:
            os._exit(0)

    def _prepare_spawned(self, seed: str, extra: dict[str, str]) -> None:  # pragma: no cover
        """In a process F spawned: the exec's limits, cwd, env and seeding.

        It becomes dumpable again (F is not), as a freshly exec'd interpreter
        would be: its memory is a copy of F's, and /proc/self/mem works.
        """
        prctl(PR_SET_DUMPABLE, 1)
        apply_limits(self.cfg["limits"])
        os.umask(0o022)
        os.chdir(self.sandbox_dir)
        env = template_env(self.cfg, self.base_env)
        env.update(extra)
        env.pop(ZYGOTE_ENV, None)
        env["COLLIMATE_SEED"] = seed
        replace_environ(env)
        apply_python_seed(seed)

    def _factory_conn(self) -> socket.socket | None:
        """A new connection to F for one exec (its end for the exec), or None."""
        if not self.factory_pid or self.factory_ctl is None:
            return None
        try:
            gone = os.waitpid(self.factory_pid, os.WNOHANG)[0] != 0
        except ChildProcessError:
            gone = True
        if gone:
            self._factory_died()
            return None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self.factory_ctl, [b"c"], [theirs.fileno()])
        except OSError:  # F is gone or wedged: never block the server on it
            mine.close()
            return None
        finally:
            theirs.close()
        return mine

    def _factory_died(self) -> None:
        self.factory_pid = 0
        if self.factory_ctl is not None:
            self.factory_ctl.close()
            self.factory_ctl = None
