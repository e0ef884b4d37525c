"""The master's side of an image template's warm fork-server IZ (``warm_image.py``).

An image template's grades would start the image's ``python3`` cold, twice (the harness,
then its candidates' zygote): more than the grade costs on ``python3``. Instead the master
keeps IZ, one warm process of the image's own Python per template, started on the first
grade that can use it and kept for the template's life.

IZ runs in a box of its own (cloned by Z like every box) over a session record nobody else
uses, so its root is the image's, pristine. The box binds that root read-only (without its
mounts) at ``/tmp``, pivots into it and detaches the container's tree, drops every
capability, loads the seccomp filter that lets a candidate build its namespaces
(``build_seccomp_filter(nest=True)``) and execs the image's ``python3 -I -S`` on the program
:func:`warm_image.program` writes to its stdin (``image_zygote_box.py``).

A grade may use IZ only where it would see what IZ sees: in a light session whose files are
the template's (:func:`pristine`: never mounted, no layer of a fork's). Its candidates then
run on a fresh copy-on-write layer of their own, and what they write is not kept in the
session (on ``python3``'s warm path it is: its candidates run in the session's files). Every
other grade takes the exec path: the harness in a cold ``python3`` of the image, in the
session's own files.

>>> pristine_lowers = ["/.collimate/l/0"]
>>> from .members import Member
>>> pristine(Member("k", list(pristine_lowers)), pristine_lowers)
True
>>> pristine(Member("k", ["/.collimate/l/0", "/.collimate/s/a/u0"]), pristine_lowers)
False
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .common import kill_pidfd
from .image_root import image_settings
from .members import Member
from .warm_image import program

if TYPE_CHECKING:
    pass

#: The record IZ's box runs over (not a session: never listed, forked or killed as one).
IZ_KEY = "_iz"
#: How long IZ may take to load (its interpreter, the harness compiled once).
START_TIMEOUT = 60.0


def pristine(member: Member, template_lowers: list[str]) -> bool:
    """Whether ``member``'s files are the template's: what IZ's candidates see."""
    return not member.mounted and member.base < 0 and member.lowers == template_lowers


@dataclass
class ImageWorker:
    """The master's handle on an image worker W: the socket a node worker grades over, and
    a pidfd (the node worker kills W through it if a grade overruns its deadline)."""

    sock: socket.socket
    pidfd: int

    def alive(self) -> bool:
        return not select.select([self.pidfd], [], [], 0)[0]  # a pidfd reads once it exits

    def close(self) -> None:
        kill_pidfd(self.pidfd)
        os.close(self.pidfd)
        self.sock.close()


class ImageZygote:
    """The master's handle on IZ: started on first use, restarted if it dies.

    ``clone`` is ``Boxes``' (a box over a record); ``settings`` the template's
    ``cfg["warm_image"]`` (its ``python3``, the harness source), ``None``: not offered.
    """

    def __init__(self, boxes: Any, cfg: dict[str, Any]) -> None:
        self.boxes = boxes
        self.cfg = cfg
        self.settings: dict[str, Any] | None = cfg.get("warm_image")
        self.sock: socket.socket | None = None
        self.pid = 0
        self.member: Member | None = None
        self.failed = ""  # why IZ cannot run here (grades then take the exec path)
        self.idle: list[ImageWorker] = []  # workers no grade holds
        self.workers = 0
        self.grades = 0  # grades handed an image worker
        self.starts = 0

    def serves(self, member: Member) -> bool:
        """Whether a grade of ``member`` may run on an image worker."""
        return (
            self.settings is not None
            and not self.failed
            and pristine(member, list(self.cfg["layers"]))
        )

    def take_worker(self) -> ImageWorker:
        """An image worker W for one grade: an idle one, else one IZ forks now."""
        while self.idle:
            worker = self.idle.pop()
            if worker.alive():
                return worker
            worker.close()
        sock = self._running()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            socket.send_fds(sock, [b"w"], [theirs.fileno()])
            sock.settimeout(10.0)
            answer, got, _flags, _addr = socket.recv_fds(sock, 4096, 1)
        except OSError as exc:
            ours.close()
            self.stop()
            raise OSError(f"the image zygote is gone: {exc}") from None
        finally:
            theirs.close()
        if answer != b"ok" or len(got) != 1:
            for fd in got:
                os.close(fd)
            ours.close()
            raise OSError(answer.decode(errors="replace") or "the image zygote is gone")
        self.workers += 1
        return ImageWorker(ours, got[0])

    def give_back(self, worker: ImageWorker) -> None:
        """A grade is done with ``worker``: keep it for the next while it lives."""
        if worker.alive() and self.sock is not None:
            self.idle.append(worker)
        else:
            worker.close()

    def _running(self) -> socket.socket:
        if self.sock is None:
            self._start()
        assert self.sock is not None
        return self.sock

    def _start(self) -> None:
        """Clone IZ's box, feed it its program, wait until it says it is ready."""
        from .box import BoxSpec

        assert self.settings is not None
        if self.member is None:  # (its namespaces are built once, kept for restarts)
            self.member = Member(IZ_KEY, list(self.cfg["layers"]))
            self.boxes.members.mount(self.member, image_dev=False)  # IZ's box binds its own
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        prog_r, prog_w = os.pipe2(os.O_CLOEXEC)
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        fds = [prog_r, theirs.fileno()]
        spec = BoxSpec("image-zygote", fds, ready_w, self.cfg, self.boxes.cap_last)
        try:
            box = self.boxes.clone_box(self.member, spec)
        except BaseException:
            for fd in (prog_w, ready_r):
                os.close(fd)
            ours.close()
            raise
        finally:
            for fd in (prog_r, ready_w):
                os.close(fd)
            theirs.close()
        self.pid, self.starts = box.pid, self.starts + 1
        deadline = time.monotonic() + START_TIMEOUT
        try:
            _write_by(prog_w, program(self._iz_settings()), deadline)
        except OSError:  # it died before it read: it says why on its ready pipe
            pass
        finally:
            os.close(prog_w)
        try:
            said = _read_by(ready_r, deadline)
        finally:
            os.close(ready_r)
        if said != b"ok":
            self.boxes.kill(box.pid)
            ours.close()
            why = said.decode(errors="replace").removeprefix("error ") or "it exited"
            self.failed = f"the image's python3 could not serve as a warm fork-server: {why}"
            print(f"collimate master: {self.failed}", file=sys.stderr)
            raise OSError(self.failed)
        self.sock = ours

    def _iz_settings(self) -> dict[str, Any]:
        assert self.settings is not None
        image = image_settings(self.cfg)
        assert image is not None
        return {
            "user": [image[0], image[1]],  # the image's user, each candidate's, on IZ's ids
            "harness": self.settings["harness"],
            "seccomp": bytes(self.cfg["_seccomp"]).hex(),
            "limits": self.cfg["limits"],
            "disk_bytes": int(self.cfg["limits"]["session_disk_bytes"]),
            "workdir": image[2],
            "cap_last": self.boxes.cap_last,
        }

    def reaped(self, pid: int) -> None:
        """A box was reaped: if it was IZ, the next grade starts a new one."""
        if pid == self.pid:
            self.pid = 0
            self.stop()

    def stop(self) -> None:
        if self.pid:
            self.boxes.kill(self.pid)
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        for worker in self.idle:  # (IZ's children: they die with it)
            worker.close()
        self.idle.clear()

    def stats(self) -> dict[str, int]:
        return {
            "image_zygote_starts": self.starts,
            "image_workers": self.workers,
            "image_grades": self.grades,
        }


def _write_by(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise OSError("the image zygote did not read its program in time")
        view = view[os.write(fd, view[: 1 << 16]) :]


def _read_by(fd: int, deadline: float) -> bytes:
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([fd], [], [], left)[0]:
        return b"error the image zygote did not start in time"
    return os.read(fd, 4096)
