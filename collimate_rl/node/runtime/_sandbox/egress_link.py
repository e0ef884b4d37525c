"""The session server's side of a networked session: starting the egress relay R.

See ``egress_relay.py`` for what R does and why it is hardened as it is. R is
started after the factory F and before the server reads any request; a
session whose R does not come up fails its bring-up.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from .common import close_other_fds, fork_until_ready, say_start_failed
from .egress_relay import EgressRelay, bind_relay_listeners, gate_socket_name
from .hardening import apply_limits, hide_internals_and_drop_capabilities
from .relay import loopback_up
from .seccomp import load_seccomp
from .syscalls import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl


class EgressLink:
    """Mixed into :class:`~.session_server.SessionServer`: starting the egress relay R."""

    cfg: dict[str, Any]
    isolated: bool
    networked: bool
    cap_last: int
    devnull: int
    relay_pid: int

    def close_fds(self) -> None:
        raise NotImplementedError

    def start_relay(self, key: str, sock_dir: str) -> None:
        """Fork R for a networked session; raises if it does not come up."""
        if not self.isolated or not self.networked or self.relay_pid:
            return
        pid = fork_until_ready(
            lambda ready_w: self._relay_main(key, sock_dir, ready_w), "egress relay"
        )
        self.relay_pid = pid

    def _relay_main(self, key: str, sock_dir: str, ready_w: int) -> None:  # pragma: no cover - R
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            signal.set_wakeup_fd(-1)
            os.setsid()  # its own process session: the post-exec sweep spares it
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            self.close_fds()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            close_other_fds({ready_w, self.devnull})
            loopback_up()
            listeners = bind_relay_listeners()
            dir_fd = os.open(sock_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            hide_internals_and_drop_capabilities(self.cap_last)
            prctl(PR_SET_DUMPABLE, 0)
            load_seccomp(self.cfg["_seccomp_relay"])  # the exec's, and no process creation
            import resource

            apply_limits(dict(self.cfg["limits"], cpu_seconds=resource.RLIM_INFINITY))
            relay = EgressRelay(listeners, dir_fd, gate_socket_name(key))
            os.write(ready_w, b"ok")
            os.close(ready_w)
        except BaseException as exc:
            say_start_failed(ready_w, exc)
        try:
            relay.run()
        finally:
            os._exit(0)
