"""The session server's side of a template service: starting the keeper K (``service.py``).

The privileged steps (binding the relay sockets in the host-shared folder,
bringing loopback up) happen in K before it hardens itself like an exec,
with ``AF_INET`` allowed and no CPU-time limit.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import signal
from typing import Any

from . import service as svc
from .common import close_other_fds, fork_until_ready, say_start_failed
from .hardening import apply_limits, drop_all_capabilities, hide_internals_and_drop_capabilities
from .image_root import enter_image_root
from .relay import loopback_up
from .seccomp import load_seccomp
from .spawned_job import on_path
from .syscalls import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl


class ServiceLink:
    """Mixed into :class:`~.session_server.SessionServer`: starting the service keeper K."""

    cfg: dict[str, Any]
    isolated: bool
    cap_last: int
    sandbox_dir: str
    devnull: int
    base_env: dict[str, str]
    service_pid: int

    def close_fds(self) -> None:
        raise NotImplementedError

    # -- the service keeper K
    def start_service(self, key: str, sock_dir: str) -> None:
        """Fork K (service.py) when the template declares a service; after F, before requests.

        Privileged steps first (bind the relay sockets in the host-shared
        directory, bring loopback up), then K hardens itself like an exec,
        with AF_INET allowed and no CPU-time limit, and starts the command.
        Raises if K does not come up, failing the session's bring-up.
        """
        spec = self.cfg.get("service")
        if not self.isolated or not spec or self.service_pid:
            return
        try:
            pid = fork_until_ready(
                lambda ready_w: self._service_main(spec, key, sock_dir, ready_w), "service keeper"
            )
        except OSError:
            unlink_service_files(sock_dir, key)
            raise
        self.service_pid = pid

    def _service_main(
        self, spec: dict[str, Any], key: str, sock_dir: str, ready_w: int
    ) -> None:  # pragma: no cover - K
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            self.close_fds()
            for fd in (0, 1, 2):
                os.dup2(self.devnull, fd)
            # nothing of the server's may stay open here (the master reads the
            # session's start-up pipe until EOF)
            close_other_fds({ready_w, self.devnull})
            listeners = svc.bind_listeners(sock_dir, key, [int(p) for p in spec["ports"]])
            dir_fd = os.open(sock_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            log_fd = os.open(
                f"{key}.svc.log",
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                0o644,
                dir_fd=dir_fd,
            )
            loopback_up()
            image = self.cfg.get("image")
            if image:  # K and its service in the image's root (K keeps its fds: its sockets)
                enter_image_root(self.sandbox_dir)
                drop_all_capabilities(self.cap_last, bounding=False)
            else:
                hide_internals_and_drop_capabilities(self.cap_last)
            # Non-dumpable: K holds a descriptor of the host-shared socket folder
            # (every session's sockets, the master's), which /proc/<K>/fd would
            # otherwise hand to any process of the session's uid.
            prctl(PR_SET_DUMPABLE, 0)
            load_seccomp(self.cfg["_seccomp_inet"])
            import resource

            apply_limits(dict(self.cfg["limits"], cpu_seconds=resource.RLIM_INFINITY))
            os.umask(0o022)
            os.chdir(self.sandbox_dir)
            env = svc.service_env(self.base_env, list(self.cfg.get("env") or []))
            argv = [str(a) for a in spec.get("argv") or []]  # an image's Entrypoint + Cmd
            if argv:
                argv[0] = on_path(argv[0], env)
            keeper = svc.Keeper(
                listeners,
                argv=argv or ["/bin/sh", "-c", str(spec["cmd"])],
                env=env,
                cwd=self.sandbox_dir,
                log_fd=log_fd,
                dir_fd=dir_fd,
                exit_name=f"{key}.svc.exit",
                devnull=self.devnull,
                in_child=_die_with_parent,
            )
            os.write(ready_w, b"ok")
            os.close(ready_w)
        except BaseException as exc:
            say_start_failed(ready_w, exc)
        try:
            keeper.run()
        finally:
            os._exit(0)


def _die_with_parent() -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def unlink_service_files(sock_dir: str, key: str) -> None:
    """Remove session ``key``'s relay sockets and service status files."""
    try:
        names = os.listdir(sock_dir)
    except OSError:
        return
    for name in names:
        if name.startswith(f"{key}.") and name != f"{key}.sock":
            try:
                os.unlink(os.path.join(sock_dir, name))
            except OSError:
                pass
