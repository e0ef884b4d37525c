"""Part 3 of the shipped harness: where T's candidate processes come from.

Stdlib only; runs only in the trusted process T. Every candidate is a process
that never saw the request: one the node's pristine factory forks
(``COLLIMATE_ZYGOTE_FD``), or, without one, a process forked by Z, a fresh
interpreter. See :mod:`._harness` for the whole design.
"""

from __future__ import annotations  # collimate: strip

import contextlib
import json
import marshal
import os
import signal
import socket
import struct
import sys

from ._child import ROLE_ENV, _recv_exact  # collimate: strip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The shipped program is codec, child | spawner, harness, grader (see ``_shipping._PARTS``):
#: Z runs the part before this line, the first of T's parts.
ZYGOTE_PART_END = "# collimate: part spawner"
#: A fresh Z reads its program from stdin: b"M" + marshal data, or b"S" + source.
_ZYGOTE_BOOT = (
    "import sys, marshal\n"
    "d = sys.stdin.buffer.read()\n"
    "exec(marshal.loads(d[1:]) if d[:1] == b'M'"
    " else compile(d[1:].decode('utf-8'), '<collimate-zygote>', 'exec'))\n"
)


ZYGOTE_FD_ENV = "COLLIMATE_ZYGOTE_FD"

_FACTORY_TIMEOUT = 2.0


def _marshal_tag() -> str:
    # the node's factory.marshal_tag(): code objects only travel within one build
    return f"{sys.implementation.cache_tag}-{sys.hexversion:x}"


def _take_factory() -> socket.socket | None:
    """Take the exec's connection to the node's factory out of the environment."""
    text = os.environ.pop(ZYGOTE_FD_ENV, None)
    if not text:
        return None
    try:
        sock = socket.socket(fileno=int(text))
        sock.set_inheritable(False)  # a fresh Z (fork + exec) must never get it
        return sock
    except (ValueError, OSError):
        return None


def _factory_spawn(sock: socket.socket, fds: list[int], program: bytes, role: str) -> int:
    """Have the node's pristine factory fork a warm process running ``program``; its pid.

    ``program`` is the ``marshal`` of the child part (it must be this build's);
    ``fds`` are C's socket, stdout, stderr and stdin: they become the new
    process's 3, 1, 2 and 4 (0 carries the program, see the child part's
    trailer). The factory
    (``COLLIMATE_ZYGOTE_FD``, see the node runtime README) forks processes that
    never saw any request: as clean as a fresh interpreter, minus the start-up.
    Raises ``OSError`` when it cannot (the caller falls back to a fresh one).
    """
    sock_fd, out_w, err_w, in_r = fds
    boot_r, boot_w = os.pipe()
    try:
        request = {
            "op": "spawn",
            "seed": os.environ.get("COLLIMATE_SEED", ""),
            "env": dict(os.environ, **{ROLE_ENV: role}),
            "code": "marshal",
            "tag": _marshal_tag(),
        }
        sent = [boot_r, out_w, err_w, sock_fd, in_r]
        socket.send_fds(sock, [json.dumps(request).encode("utf-8")], sent)
        reply = json.loads(sock.recv(65536) or b"null")
    except (OSError, ValueError) as exc:
        os.close(boot_w)
        raise OSError(f"the factory did not answer: {exc}") from None
    finally:
        os.close(boot_r)
    pid = reply.get("pid") if type(reply) is dict and reply.get("ok") is True else None
    if type(pid) is not int or pid <= 1 or pid == os.getpid():
        os.close(boot_w)
        why = reply.get("error") if type(reply) is dict else None
        raise OSError("the factory refused to spawn" + (f": {why}" if type(why) is str else ""))
    if reply.get("marshal") is not True:  # another interpreter build: not ours
        os.close(boot_w)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        raise OSError("the factory runs another interpreter build")
    _hand_over(boot_w, program)
    return pid


def _hand_over(boot_w: int, program: bytes) -> None:
    """Write ``program`` into a new process's boot pipe and close it (plain ``os`` calls:
    a file object would stat the pipe, seek it and ask whether it is a tty).

    A process that died before reading it is found gone by the first request to it.
    """
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(boot_w, view) :]
    except OSError:
        pass
    finally:
        os.close(boot_w)


class _Zygote:
    """T's source of candidate processes, none of which ever saw the request.

    A runtime may still hold the exec request, files included, in the exec
    process's memory (the local node does, in its exec child's frames), so a
    plain fork of T would hand that to the candidate. When the exec has the
    node's pristine factory (``COLLIMATE_ZYGOTE_FD``) and T runs compiled code
    of this build, every candidate is a warm process the factory forks
    directly, running the child part (``code``, sent as ``marshal``). Else,
    or once the factory fails, candidates are forked by Z: a *fresh
    interpreter* (fork, then exec) running the child part, started before T
    reads any secret when there is no factory.
    """

    def __init__(self, source: str | None, code: Any = None, spawned: Any = None) -> None:
        if code is None and not source:
            raise OSError("no zygote program")
        self.source = source
        self.code = code
        # what the factory's processes run: ``spawned`` (a few bytes that enter
        # the warm harness) or the child part itself
        entry = spawned if spawned is not None else code
        self.spawned = marshal.dumps(entry) if entry is not None else None
        self.factory: socket.socket | None = _take_factory()  # taken (and closed) in every case
        if self.factory is not None and (
            self.spawned is None or self.factory.type != socket.SOCK_SEQPACKET
        ):
            self._drop_factory()
        self.warm = self.factory is not None
        self.pid = 0
        self.ctl: socket.socket | None = None
        self.alive = True
        if self.factory is None:
            self._start_fresh()

    def _drop_factory(self) -> None:
        if self.factory is not None:
            self.factory.close()
            self.factory = None

    def _start_fresh(self) -> None:
        """Start Z: fork, then exec a fresh interpreter that runs the child part."""
        if not sys.executable:
            raise OSError("no interpreter to start")
        if self.code is not None:
            program = b"M" + marshal.dumps(self.code)
        else:
            program = b"S" + f"{self.source}\n_zygote_main(3)\n".encode()
        parent, child = socket.socketpair()
        boot_r, boot_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(boot_r, 0)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                os.dup2(child.fileno(), 3)
                os.set_inheritable(3, True)
                os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", _ZYGOTE_BOOT])
            finally:
                os._exit(127)
        child.close()
        os.close(boot_r)
        _hand_over(boot_w, program)
        self.pid = pid
        self.ctl = parent

    def spawn(self, fds: list[int], timeout: float) -> int:
        """A new candidate process holding ``fds`` (socket, stdout, stderr, stdin); its pid."""
        if not self.alive:
            raise OSError("the zygote is gone")
        if self.factory is not None and self.spawned is not None:
            try:
                self.factory.settimeout(max(0.05, min(timeout, _FACTORY_TIMEOUT)))
                return _factory_spawn(self.factory, fds, self.spawned, "candidate")
            except OSError:
                self._drop_factory()  # e.g. a candidate killed it: a fresh Z from now on
                self._start_fresh()
        assert self.ctl is not None
        try:
            self.ctl.settimeout(max(0.05, min(timeout, 10.0)))
            socket.send_fds(self.ctl, [b"S"], fds)
            data = _recv_exact(self.ctl, 8)
        except OSError:
            self.alive = False
            raise
        if data is None:
            self.alive = False
            raise OSError("the zygote is gone")
        return int(struct.unpack("!q", data)[0])

    def close(self) -> None:
        self._drop_factory()
        if self.ctl is not None:
            with contextlib.suppress(OSError):
                self.ctl.close()
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
