"""What runs on each Ray node: a :class:`NodeHost` actor owning one :class:`LocalNode`.

The actor's process holds the node's owner pipe (``serve --exit-with-fd``), so the
node drains and exits by itself when the actor dies, however it dies: ``close()``,
``ray.kill``, the driver's death (Ray kills a dead driver's actors), or the loss of
the Ray node's raylet.

Every host keeps its files in ``$TMPDIR/cray-<uid>/h<tag>/`` and holds an ``flock``
on ``owner.lock`` there for its whole life. A host that died without ``stop()`` leaves
that folder (the node's log and state dir); the next host started on the same machine
finds it by its free lock, recovers the state dir like a restarted node would
(processes, mounts, memory cgroups) and removes it.

>>> sorted(HOST_METHODS)[:2]
['create_session', 'delete_session']
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from collimate_rl.ray._janitor import _OWNER_LOCK, clear_host_folder
from collimate_rl.ray._janitor import spawn as spawn_janitor

__all__ = [
    "HOST_METHODS",
    "NodeHost",
    "clear_host_folder",
    "host_root",
    "sweep_stale_hosts",
]

#: The session-surface calls :meth:`NodeHost.call` forwards (the Ray-transport path).
HOST_METHODS: Final = frozenset(
    {"health", "create_session", "delete_session", "session_exec", "exec_once", "fork_session"}
)
#: ``LocalNode`` arguments a fleet passes through to every node.
NODE_OPTIONS: Final = frozenset(
    {
        "isolation",
        "max_inflight",
        "queue",
        "max_sessions",
        "session_ttl",
        "pool_size",
        "drain_timeout",
        "startup_timeout",
        "share_site_packages",
        "extra_args",
        "metrics_token",
    }
)


def host_root(tmp: str | Path | None = None) -> Path:
    """The folder every host of this user keeps its files in (created ``0700``)."""
    root = Path(tmp or tempfile.gettempdir()) / f"cray-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    if root.stat().st_uid != os.getuid():
        raise PermissionError(f"{root} belongs to another user; set TMPDIR to a private folder")
    return root


def _claim(root: Path, tag: str) -> tuple[Path, int]:
    """Make ``root/h<tag>`` and hold its owner lock (created locked, then moved in place).

    A sweeper only ever sees a lock file that is already held.
    """
    folder = root / f"h{tag}"
    folder.mkdir(mode=0o700)
    staging = folder / f".{_OWNER_LOCK}.{os.getpid()}"
    fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(staging, folder / _OWNER_LOCK)
    except BaseException:
        os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder, fd


def sweep_stale_hosts(root: Path) -> int:
    """Recover and remove the folders of hosts that died without stopping; how many.

    Only folders whose owner lock exists and is free are touched.
    """
    return sum(1 for folder in sorted(root.glob("hn*")) if clear_host_folder(folder))


class NodeHost:
    """One fleet node's LocalNode, on TCP on this machine's address (a Ray actor's body).

    Args:
        tag: the node's tag (names its folder; prefixes its session ids).
        host: the address to listen on (the Ray node's IP).
        port: the TCP port (``None``: a free one).
        options: ``LocalNode`` arguments (:data:`NODE_OPTIONS`).
    """

    def __init__(
        self,
        tag: str,
        host: str,
        port: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        from collimate_rl.node import LocalNode

        options = dict(options or {})
        unknown = set(options) - NODE_OPTIONS
        if unknown:
            raise ValueError(f"unknown node options: {', '.join(sorted(unknown))}")
        root = host_root()
        sweep_stale_hosts(root)
        self.tag = tag
        self._janitor_fd = -1
        self._client: Any = None
        self.folder, self._owner_fd = _claim(root, tag)
        extra = tuple(options.pop("extra_args", ()))
        try:
            # Over TCP a LocalNode makes a fresh bearer token (`serve --token-file` in its
            # folder); the fleet's clients get it from info().
            self.node = LocalNode(
                host=host, port=port, workdir_root=self.folder, extra_args=extra, **options
            )
            self.node.start()
            # Ray SIGKILLs an exiting actor's children: a detached janitor cleans up then.
            self._janitor_fd = spawn_janitor(self.folder, self.node.pid or 0)
        except BaseException:
            if hasattr(self, "node"):
                with contextlib.suppress(Exception):
                    self.node.stop()
            self._release()
            raise

    def info(self) -> dict[str, Any]:
        """Where the node listens and who runs it (called once it started)."""
        import ray

        return {
            "tag": self.tag,
            "ray_node_id": ray.get_runtime_context().get_node_id(),
            "address": self.node.base_url,
            "pid": self.node.pid or 0,
            "host_pid": os.getpid(),
            "folder": str(self.folder),
            "workdir": str(self.node.workdir),
            "token": self.node.token,
        }

    def call(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Run a session-surface call on the node from here: the Ray-transport path.

        The fleet's clients use HTTP to the node's address (faster, see
        docs/scale-out.md); the benchmark compares the two through this method.
        """
        if method not in HOST_METHODS:
            raise ValueError(f"not a session-surface call: {method!r}")
        if self._client is None:
            self._client = self.node.client()
        result = getattr(self._client, method)(*args, **kwargs)
        return dict(result.raw)

    def stop(self) -> int | None:
        """Drain and stop the node, remove its files; the node's exit status.

        Also clears what hosts that died on this machine left (e.g. a lost node's).
        """
        try:
            return self.node.stop()
        finally:
            self._release()
            with contextlib.suppress(OSError):
                sweep_stale_hosts(self.folder.parent)

    def _release(self) -> None:
        fd, self._owner_fd = self._owner_fd, -1
        shutil.rmtree(self.folder, ignore_errors=True)
        if fd >= 0:
            os.close(fd)
        janitor, self._janitor_fd = self._janitor_fd, -1
        if janitor >= 0:
            os.close(janitor)  # the folder is gone: the janitor just exits
