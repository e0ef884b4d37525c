"""Bringing up session servers: namespaces, the session's filesystem, the server itself.

Runs in the master (fresh sessions), in helpers the master forks (forks of a
session: they join the parent's user and mount namespaces first), and in
the new session server (pid 1 of its own user/pid/net/ipc/mount
namespaces), which mounts its ``/proc``, its size-limited tmpfs with the
overlay layers, ``/tmp``, ``/dev/shm`` and a private devpts, starts its
service keeper K (and for a networked session the egress relay R), and
serves; its factory F starts at the first connection, before anything is read
from it.
The ``none`` driver's sessions are plain forks with a copied directory.
"""

# ruff: noqa: SIM105
from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any

from .common import close_other_fds, freeze_heap, log_exception
from .image_root import image_settings, mount_image_root_parts
from .layers import overlay_options
from .layout import INTERNAL_DIR, SANDBOX_DIR
from .session_server import SessionServer
from .syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_PDEATHSIG,
    clone_process,
    mount,
    prctl,
    setns,
    write_id_maps,
)


class SessionSetup:
    """Mixed into :class:`~.master.Master`: the steps that bring a session server up."""

    cfg: dict[str, Any]
    sock_dir: str
    lsock: socket.socket | None
    conn: socket.socket | None

    def _session_child(
        self, key: str, lowers: list[str], ns_fds: list[int], parent: str | None, w: int
    ) -> None:  # pragma: no cover - runs in a forked child
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            close_other_fds({0, 1, 2, 3, 4, w})  # nothing of the master's stays open
            self._plain_session(key, parent, w)
        except BaseException as exc:
            try:
                os.write(w, f"error {type(exc).__name__}: {exc}\n".encode())
            except BaseException:
                pass
            try:
                import traceback

                sys.stderr.write(f"collimate session {key}: server failed:\n")
                traceback.print_exc()
                sys.stderr.flush()
            except BaseException:
                pass
            os._exit(1)
        os._exit(0)

    def _clone_sessions(
        self, jobs: list[tuple[str, list[str], int]], ns_fds: list[int], network: bool = False
    ) -> None:
        """Clone one session server per job, each pid 1 of fresh namespaces.

        Runs in the master (fresh sessions) or in a forked helper that first
        joins the parent session's user and mount namespaces (forks: the
        parent's frozen layers are mounted there; its /sandbox, /tmp, /dev/shm
        and /proc get mounted over, not unmounted: an umount costs an RCU
        grace period). The helper reports and exits; the master, a
        subreaper, inherits the servers.
        """
        helper = bool(ns_fds)
        try:
            proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            if helper:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                if self.conn is not None:
                    self.conn.close()
                if self.lsock is not None:
                    self.lsock.close()
                setns(ns_fds[0], CLONE_NEWUSER)
                setns(ns_fds[1], CLONE_NEWNS)
            uid, gid = os.getuid(), os.getgid()
            flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
            for key, lowers, w in jobs:
                go_r, go_w = os.pipe2(os.O_CLOEXEC)
                try:
                    pid = clone_process(flags)
                except OSError as exc:
                    os.write(w, f"error clone: {exc}\n".encode())
                    os.close(go_r)
                    os.close(go_w)
                    continue
                if pid == 0:  # pragma: no cover - the new session server
                    os.close(go_w)
                    for _, _, other in jobs:
                        if other != w:
                            os.close(other)
                    os.close(proc)
                    self._session_pid1(key, lowers, bool(ns_fds), w, go_r, network)
                os.close(go_r)
                try:
                    pdir = os.open(str(pid), os.O_PATH | os.O_DIRECTORY, dir_fd=proc)
                    try:
                        image = image_settings(self.cfg)
                        if image is None:
                            write_id_maps(pdir, 1000, uid, gid)
                        else:  # the image's user, as the sandbox uid (image_root.py)
                            write_id_maps(pdir, image[0], uid, gid, image[1])
                    finally:
                        os.close(pdir)
                    os.write(go_w, b"g")
                    os.write(w, f"pid {pid}\n".encode())
                except OSError as exc:
                    os.write(w, f"pid {pid}\nerror id maps: {exc}\n".encode())
                finally:
                    os.close(go_w)
            os.close(proc)
        except BaseException as exc:
            if not helper:
                raise
            for _, _, w in jobs:
                try:
                    os.write(w, f"error {type(exc).__name__}: {exc}\n".encode())
                except OSError:
                    pass
            os._exit(1)
        if helper:
            os._exit(0)

    def _session_pid1(
        self, key: str, lowers: list[str], forked: bool, w: int, go_r: int, network: bool
    ) -> None:  # pragma: no cover - runs in the cloned session server
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            # nothing of the master's stays open (its sockets, light sessions' namespaces)
            close_other_fds({0, 1, 2, 3, 4, w, go_r})
            if os.read(go_r, 1) != b"g":  # the creator failed to write our id maps
                os._exit(1)
            os.close(go_r)
            self._isolated_session(key, lowers, forked, w, network)
        except BaseException as exc:
            try:
                os.write(w, f"error {type(exc).__name__}: {exc}\n".encode())
            except BaseException:
                pass
            log_exception(f"session {key}")
            os._exit(1)
        os._exit(0)

    def _isolated_session(
        self, key: str, lowers: list[str], forked: bool, w: int, network: bool
    ) -> None:
        # pid 1 of the session's pid namespace
        if not forked:  # forks inherit the parent's private propagation
            mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        layer_dir = os.path.join(INTERNAL_DIR, "s", key)
        os.mkdir(layer_dir, 0o700)
        disk = int(self.cfg["limits"]["session_disk_bytes"])
        mount("tmpfs", layer_dir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk},mode=0700")
        os.mkdir(os.path.join(layer_dir, "u0"), 0o755)
        os.mkdir(os.path.join(layer_dir, "w0"), 0o700)
        tmp = os.path.join(layer_dir, "tmp")
        os.mkdir(tmp)
        os.chmod(tmp, 0o1777)
        mount(
            "overlay",
            SANDBOX_DIR,
            "overlay",
            MS_NOSUID | MS_NODEV,
            overlay_options(lowers, layer_dir, 0),
        )
        mount(tmp, "/tmp", None, MS_BIND, None)
        shm = os.path.join(layer_dir, "shm")
        os.mkdir(shm)
        os.chmod(shm, 0o1777)
        mount(shm, "/dev/shm", None, MS_BIND, None)
        try:  # a private pty namespace (bwrap's devpts is shared by the container)
            mount(
                "devpts",
                "/dev/pts",
                "devpts",
                MS_NOSUID | MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=0620",
            )
        except OSError:
            pass
        image = image_settings(self.cfg)
        if image is not None:  # /sandbox is the image's root: its /dev and /proc inside
            # (pid 1 stays outside the root; it keeps its capabilities, which the execs'
            # lack, so its /proc/1/root is theirs to open no more than for python3 sessions)
            mount_image_root_parts()
        os.chdir("/")
        lsock = self._listen(key)
        server = SessionServer(
            self.cfg,
            lsock,
            isolated=True,
            sandbox_dir=SANDBOX_DIR if image is None else image[2],
            tmp_dir="/tmp",
            layer_dir=layer_dir,
            lowers=lowers,
            gen=0,
            networked=network,
        )
        freeze_heap(collect=False, trim=False)
        server.start_service(key, self.sock_dir)  # F starts at the first connection
        server.start_relay(key, self.sock_dir)
        os.write(w, b"ready\n")
        os.close(w)
        server.serve()

    def _plain_session(self, key: str, parent: str | None, w: int) -> None:
        master = os.getppid()
        os.setsid()
        # No pid namespace takes this server down with the master: die with it
        # (the master dies with the node), so a crashed node leaves no sessions.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != master:
            os._exit(1)
        root = os.path.join(self.cfg["none_root"], key)
        sandbox = os.path.join(root, "sandbox")
        tmp = os.path.join(root, "tmp")
        os.makedirs(tmp, 0o700)
        if parent is not None:
            import shutil

            shutil.copytree(
                os.path.join(self.cfg["none_root"], parent, "sandbox"), sandbox, symlinks=True
            )
        else:
            os.makedirs(sandbox, 0o755)
            import shutil

            for layer in reversed(self.cfg["layers"]):
                shutil.copytree(layer, sandbox, symlinks=True, dirs_exist_ok=True)
        os.chdir(root)
        lsock = self._listen(key)
        cfg = dict(self.cfg)
        env = dict(cfg.get("base_env") or {})
        env.update(HOME=sandbox, TMPDIR=tmp, PYTHONUSERBASE=os.path.join(sandbox, ".local"))
        cfg["base_env"] = env
        server = SessionServer(
            cfg,
            lsock,
            isolated=False,
            sandbox_dir=sandbox,
            tmp_dir=tmp,
            layer_dir=None,
            lowers=[],
            gen=0,
        )
        freeze_heap()
        os.write(w, f"pid {os.getpid()}\nready\n".encode())
        os.close(w)
        server.serve()

    def _listen(self, key: str) -> socket.socket:
        path = os.path.join(self.sock_dir, f"{key}.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(path)
        lsock.listen(64)
        return lsock
