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
import fcntl
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = ["clear_host_folder", "main", "spawn"]

log = logging.getLogger("collimate_rl.ray")

#: The lock file a live host holds in its folder (see ``_host``).
_OWNER_LOCK: Final = "owner.lock"

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

    deadline = time.monotonic() + _PATIENCE_SECONDS
    while folder.exists() and time.monotonic() < deadline:
        node_gone = process_start(node_pid) != node_start
        if node_gone and clear_host_folder(folder):
            break
        time.sleep(0.5)
    return 0


def clear_host_folder(folder: Path) -> bool:
    """Recover and remove one host's folder if its host is dead and its node stopped.

    Recovery is a restarted node's (the run's processes, mounts, memory cgroups,
    sockets); a folder whose owner lock is held, or whose node still runs (e.g. it
    drains after its host died), is left alone. Returns whether it was removed.
    """
    from collimate_rl.node.runtime._recovery import StateDirBusy, claim_state_dir

    try:
        fd = os.open(folder / _OWNER_LOCK, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False  # being created, already removed, or not a host's
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live host
        for state in folder.glob("*/state"):
            try:
                claim, _ = claim_state_dir(state)
            except StateDirBusy:
                return False
            except OSError:
                continue
            claim.release()
        shutil.rmtree(folder, ignore_errors=True)
        log.warning("removed %s, left by a fleet node that died without stopping", folder)
        return True
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
