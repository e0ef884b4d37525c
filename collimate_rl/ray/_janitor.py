"""A fleet node's janitor: it clears the node's folder once the node's actor is gone.

When a Ray actor exits for any reason but a graceful shutdown (its driver died,
``ray.kill``), Ray SIGKILLs the actor's direct children: the LocalNode gets no chance
to drain, and its state dir keeps what it had (memory cgroups, session sockets, its
run record). So every :class:`~collimate_rl.ray._host.NodeHost` starts a janitor that
detaches itself (it is the actor's grandchild, so that kill misses it). It waits for a
pipe only the actor holds to reach EOF, then for the node process to be gone, then
recovers the state dir the way a restarted node would and removes the folder. After a
clean ``stop()`` the folder is already gone and the janitor just exits.

If Ray is configured to kill every descendant of a dead worker
(``RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper=1``), the janitor dies
too; the next fleet node started or stopped on that machine sweeps the folder instead.

Run by :func:`spawn`: ``python -m collimate_rl.ray._janitor FOLDER NODE_PID NODE_START FD``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "spawn"]

#: How long a janitor waits for a draining node to exit before giving up on it.
_PATIENCE_SECONDS = 900.0


def spawn(folder: Path, node_pid: int) -> int:
    """Start the janitor of ``folder`` (detached); the pipe end the host must keep open."""
    from collimate_rl.node.runtime._recovery import process_start

    start = process_start(node_pid) or 0
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "collimate_rl.ray._janitor", str(folder)]
    argv += [str(node_pid), str(start), str(read_end)]
    try:
        intermediate = subprocess.Popen(
            argv,
            pass_fds=(read_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        intermediate.wait(timeout=60)  # it forks the janitor and exits at once
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return write_end


def main(argv: Sequence[str] | None = None) -> int:
    """Detach, wait for the host to go, clear its folder."""
    folder_arg, pid_arg, start_arg, fd_arg = list(sys.argv[1:] if argv is None else argv)
    folder, node_pid, node_start, fd = Path(folder_arg), int(pid_arg), int(start_arg), int(fd_arg)
    if os.fork():
        os._exit(0)  # the intermediate: the janitor is now nobody's child in the actor's tree
    with contextlib.suppress(OSError):
        while os.read(fd, 1):
            pass
    from collimate_rl.node.runtime._recovery import process_start
    from collimate_rl.ray._host import clear_host_folder

    deadline = time.monotonic() + _PATIENCE_SECONDS
    while folder.exists() and time.monotonic() < deadline:
        node_gone = process_start(node_pid) != node_start
        if node_gone and clear_host_folder(folder):
            break
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
