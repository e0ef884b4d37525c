"""Standby exec boxes: a hardened exec box waiting for its session's next exec.

The master makes an exec box's pipes itself, so it can clone one before anyone asks:
once a session has run two execs, the master keeps one hardened exec box ready for it,
blocked on its job pipe, and the next exec takes it (its clone and set-up, ~5 ms, are
then off the exec's latency path).

That box is, first, the one the session's last exec ran in: its init kills and reaps
everything the exec started, then says ``idle`` on its line to the master (a socket pair,
the box's fd 5) before it closes its status pipe. When the worker hangs up, the master
finds that word already there, sends the box the next exec's pipes on the line and keeps
it: no clone, no set-up and no teardown for the next exec. Python code runs in a fork of
the init, which must hold nothing of earlier jobs: a box whose init never read a job
(Python jobs are read by their fork, see ``box.py``) is *pristine* (``idle pristine``) and
takes any exec; one whose init read a program's job (a shell command, argv lists, another
interpreter: spawned, or forked when the limits forbid a spawn) is *kept* for ``spawn``
jobs only. A box that did not say it is idle (killed at the deadline or past the output
cap, dead, or still running because its worker died) is killed, and a pristine one is
armed in its place.

At most ``MAX_STANDBY`` wait at a time, node-wide. A standby box is the session's like any
box (``boxes.py`` clones, kills and reaps it): it dies with the session, and with a fork
that freezes the session's upper layer (its copy of the mount namespace still writes the
old one).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from .box_records import Box

if TYPE_CHECKING:
    from .members import Member

#: Standby exec boxes waiting at most, node-wide (each holds a process and a network namespace).
MAX_STANDBY = 16
#: A session's standby exec box is armed from its second exec on (one exec is no pattern yet).
STANDBY_AFTER_EXECS = 2


class Standby:
    """The exec boxes waiting for their sessions' next execs, at most one of each kind a
    session: a pristine one (takes any exec) and a kept one (takes ``spawn`` jobs only).

    ``clone_exec`` clones a session's exec box; ``kill`` kills a box (``Boxes``' own).
    """

    def __init__(self, clone_exec: Callable[[Member], Box], kill: Callable[[int], None]) -> None:
        self._clone_exec = clone_exec
        self._kill = kill
        self.pristine: dict[str, Box] = {}  # session key -> its pristine standby exec box
        self.kept: dict[str, Box] = {}  # session key -> a standby box that read a job
        self.times_kept = 0  # exec boxes kept for another exec (``keep``)

    def __len__(self) -> int:
        return len(self.pristine) + len(self.kept)

    def take(self, key: str, spawn: bool) -> Box | None:
        """Session ``key``'s waiting exec box for the next job, if it has one alive."""
        return (_take(self.kept, key) if spawn else None) or _take(self.pristine, key)

    def keep(self, box: Box | None, member: Member) -> bool:
        """Keep ``box``, whose exec is over, as ``member``'s standby box, if it said it is idle.

        It said so before its status pipe closed, and its worker hung up after that: the
        word is in its line by now, or the box is not fit to serve again.
        """
        if (
            box is None
            or box.line is None
            or box.gen != member.gen  # a fork froze the layer it writes (forks wait for
            # a session's execs, ``SessionBusy``: this guards that rule from afar)
            or len(self) >= MAX_STANDBY
        ):
            return False
        try:
            said = box.line.recv(16, socket.MSG_DONTWAIT)
        except OSError:
            return False
        # "idle pristine": it read no job (Python runs in its forks); "idle": it read some
        waiting = {b"idle pristine": self.pristine, b"idle": self.kept}.get(said)
        if waiting is None or member.key in waiting:
            return False
        try:
            box.pipes = _send_pipes(box.line)
        except OSError:
            return False
        box.conn = None
        waiting[member.key] = box
        self.times_kept += 1
        return True

    def arm(self, member: Member) -> None:
        """Clone ``member``'s next exec box now, if it has none and the budget allows."""
        if member.key in self.pristine or len(self) >= MAX_STANDBY:
            return
        try:
            self.pristine[member.key] = self._clone_exec(member)
        except OSError:  # best effort: the next exec clones its own
            return

    def drop(self, key: str) -> None:
        """Kill ``key``'s standby exec boxes (a fork froze the layer their mount namespace
        writes)."""
        for box in self.forget(key):
            self._kill(box.pid)

    def forget(self, key: str) -> list[Box]:
        """Stop keeping ``key``'s boxes (a dropped session's die with its other boxes); them."""
        found = (waiting.pop(key, None) for waiting in (self.pristine, self.kept))
        return [box for box in found if box is not None]

    def reaped(self, box: Box) -> None:
        """``box`` exited: it waits no more."""
        for waiting in (self.pristine, self.kept):
            if waiting.get(box.key) is box:
                del waiting[box.key]


def exec_pipes() -> tuple[list[int], list[int]]:
    """An exec's four pipes (job, output, seed acknowledgement, status): the box's ends and
    the worker's."""
    (job_r, job_w), (out_r, out_w), (ack_r, ack_w), (st_r, st_w) = (
        os.pipe2(os.O_CLOEXEC) for _ in range(4)
    )
    return [job_r, out_w, ack_w, st_w], [job_w, out_r, ack_r, st_r]


def close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _send_pipes(line: socket.socket) -> list[int]:
    """Send a kept exec box its next exec's pipes; the worker's ends."""
    theirs, ours = exec_pipes()
    try:
        socket.send_fds(line, [b"pipes"], theirs, socket.MSG_DONTWAIT)
    except OSError:
        close_all(ours)
        raise
    finally:
        close_all(theirs)
    return ours


def _take(waiting: dict[str, Box], key: str) -> Box | None:
    box = waiting.pop(key, None)
    if box is None or _has_exited(box.pid):  # died waiting (not reaped yet): never hand out
        return None
    return box


def _has_exited(pid: int) -> bool:
    """Whether our child ``pid`` has exited (it stays unreaped: the reaper does that)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
