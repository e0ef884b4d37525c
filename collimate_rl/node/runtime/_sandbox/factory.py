"""The pristine factory F: warm, request-free Python processes on demand.

Stdlib only, Python 3.10+, loaded by the supervisor (next to it, in the
read-only ``/.collimate/sup``) before any session exists; importing it has
no side effects.

Each isolated session server forks one F when its first connection is ready
to accept, *before it reads any request*, so F's memory never held request data. F
hides ``/.collimate``, drops every capability, sets ``no_new_privs``, loads
the exec seccomp filter and marks itself non-dumpable (same-uid processes
cannot read or write its memory; its children inherit that). It then only
serves spawn commands; the post-exec sweep spares it.

Channels (all ``AF_UNIX``/``SOCK_SEQPACKET``, one message per datagram):

* control (session server -> F): a 1-byte message carrying one fd by
  SCM_RIGHTS: a new connection, one per exec (its other end is the exec's
  ``COLLIMATE_ZYGOTE_FD``). F exits when the control socket closes.
* connection (exec -> F), the spawn protocol. Request: a UTF-8 JSON object
  ``{"op": "spawn", "seed": <64 hex>, "env": {str: str},
  "code": "source" | "marshal", "tag": <marshal tag>}`` with 1 to 5 fds by
  SCM_RIGHTS, which become fds 0, 1, 2, ... of the new process (missing 1/2:
  /dev/null). Reply: ``{"ok": true, "pid": N, "marshal": bool}`` or
  ``{"ok": false, "error": "..."}``. ``marshal`` is true only when the
  request asked for it and ``tag`` equals F's :func:`marshal_tag`. After the
  reply the requester writes the program to the new process's fd 0 and
  closes it: Python source, or with ``marshal`` a ``marshal.dumps`` of a
  code object.

The new process (a fork of F: warm, pre-imported, never saw a request) is
the leader of its own session and process group, in the exec's pid
namespace and uid (the caller may kill it by pid); F reaps it. It closes
every fd but the ones it was given (and 0..2), applies the exec's rlimits,
``umask 022``, cwd ``/sandbox``, env = template env + ``env`` + ``COLLIMATE_SEED``, seeds
``random`` like a warm exec, then runs the program as ``__main__``, like
``python -I -S -`` without the start-up. A request F cannot parse gets an
error reply; a connection that misbehaves (or whose replies would block) is
dropped, never F.
"""

# ruff: noqa: SIM105, SIM115
from __future__ import annotations

import json
import marshal
import os
import selectors
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from .box_requests import valid_env, valid_seed

MAX_FDS = 5
MAX_REQUEST = 1 << 16


def marshal_tag() -> str:
    """Code objects marshal compatibly only within one interpreter build."""
    return _MARSHAL_TAG


_MARSHAL_TAG = f"{sys.implementation.cache_tag}-{sys.hexversion:x}"


def load_warm_modules(modules: dict[str, Any] | None) -> None:
    """Define trusted modules in this process; each gets ``WARM_DIGEST``.

    ``modules`` maps a name to its source, or to ``{"digest", "tag", "code"}``:
    the code object compiled by the node (``marshal``, zlib, base64) with the
    source's sha256. Loading that avoids compiling here, whose parser memory
    would stay resident in every process forked from this one. A ``tag`` of
    another interpreter build skips the module (grades then ship the harness).

    The template's fork-server calls this before any session exists, so every
    session server, factory F, exec child and spawned process inherits them
    warm. ``WARM_DIGEST`` is the source's sha256: a program that wants exactly
    its own version of a module compares it (the grading harness does).
    """
    import binascii
    import types
    import zlib

    for name, entry in (modules or {}).items():
        if isinstance(entry, str):
            import hashlib  # (only here: it maps libcrypto, ~0.4 MiB in every forked image)

            digest = hashlib.sha256(entry.encode("utf-8")).hexdigest()
            code = compile(entry, f"<{name}>", "exec")
        elif entry.get("tag") == marshal_tag():
            digest = str(entry["digest"])
            code = marshal.loads(zlib.decompress(binascii.a2b_base64(entry["code"])))
        else:
            print(f"collimate: warm module {name!r} is for another build", file=sys.stderr)
            continue
        module = types.ModuleType(name)
        module.__dict__["WARM_DIGEST"] = digest
        exec(code, module.__dict__)
        sys.modules[name] = module


#: Sets up the new process: (seed, env) -> None; limits, cwd, env, seeding.
Prepare = Callable[[str, dict[str, str]], None]


class Factory:
    """F's loop. ``ctl`` is the control socket; ``prepare`` runs in each child."""

    def __init__(self, ctl: socket.socket, prepare: Prepare) -> None:
        self.ctl = ctl
        self.prepare = prepare
        self.conns: dict[int, socket.socket] = {}
        self.sel = selectors.DefaultSelector()
        self.space = socket.CMSG_SPACE(MAX_FDS * 4)

    def serve(self) -> None:  # pragma: no cover - runs in F
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        self.ctl.setblocking(True)
        self.sel.register(self.ctl, selectors.EVENT_READ, None)
        while True:
            try:
                events = self.sel.select()
            except InterruptedError:
                continue
            for key, _ in events:
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self.ctl:
                    self._on_ctl()
                elif sock.fileno() in self.conns:
                    self._on_conn(sock)

    def _on_ctl(self) -> None:  # pragma: no cover - runs in F
        try:
            msg, fds, _flags, _addr = socket.recv_fds(self.ctl, 16, 1)
        except InterruptedError:
            return
        except OSError:
            msg, fds = b"", []
        if not msg and not fds:
            os._exit(0)  # the session server is gone
        for fd in fds:
            conn = socket.socket(fileno=fd)
            conn.setblocking(False)
            self.conns[conn.fileno()] = conn
            self.sel.register(conn, selectors.EVENT_READ, None)

    def _drop(self, conn: socket.socket) -> None:  # pragma: no cover - runs in F
        self.conns.pop(conn.fileno(), None)
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _on_conn(self, conn: socket.socket) -> None:  # pragma: no cover - runs in F
        try:
            msg, fds, flags, _addr = socket.recv_fds(conn, MAX_REQUEST, MAX_FDS)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        try:
            if not msg and not fds:
                self._drop(conn)
                return
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                reply: dict[str, Any] = {"ok": False, "error": "request too large"}
            else:
                reply = self._spawn(msg, fds)
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            conn.send(json.dumps(reply).encode())
        except OSError:  # would block or the peer is gone: drop it, never wait
            self._drop(conn)

    def _spawn(self, msg: bytes, fds: list[int]) -> dict[str, Any]:  # pragma: no cover
        try:
            req = json.loads(msg.decode("utf-8"))
            if type(req) is not dict or req.get("op") != "spawn":
                raise ValueError("not a spawn request")
            seed = req.get("seed")
            if not valid_seed(seed):
                raise ValueError("seed must be 64 hex characters")
            env = req.get("env") or {}
            if not valid_env(env):
                raise ValueError("env must map names to strings")
            if not 1 <= len(fds) <= MAX_FDS:
                raise ValueError(f"pass 1 to {MAX_FDS} fds")
            use_marshal = req.get("code") == "marshal" and req.get("tag") == marshal_tag()
        except (ValueError, UnicodeDecodeError) as exc:
            return {"ok": False, "error": f"bad request: {exc}"}
        try:
            pid = os.fork()
        except OSError as exc:
            return {"ok": False, "error": f"fork: {exc}"}
        if pid == 0:
            self._child(fds, seed, dict(env), use_marshal)
        return {"ok": True, "pid": pid, "marshal": use_marshal}

    def _child(
        self, fds: list[int], seed: str, env: dict[str, str], use_marshal: bool
    ) -> None:  # pragma: no cover - runs in the new process; never returns
        rc = 1
        try:
            for sig in (signal.SIGCHLD, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            # as a fresh interpreter would have them
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.setsid()
            # F keeps 0..2 on /dev/null and the control socket on 3, so every
            # received fd is >= 4: the dup2s onto 0..3 never clobber one still
            # to be moved, and fd 4 is taken over last.
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.set_inheritable(target, True)
            for sock in [self.ctl, *self.conns.values()]:
                sock.detach()
            self.conns.clear()
            os.closerange(max(len(fds), 3), 1 << 16)
            self.prepare(seed, env)
            data = bytearray()
            while True:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    break
                data += chunk
            if use_marshal:
                code = marshal.loads(bytes(data))
            else:
                code = compile(bytes(data).decode("utf-8", "surrogateescape"), "<stdin>", "exec")
            del data
            rc = run_main(code, "<stdin>")
        except BaseException as exc:
            try:
                os.write(2, f"collimate zygote: start failed: {exc!r}\n".encode())
            except BaseException:
                pass
        os._exit(rc)


Stdio = tuple[Any, Any, Any]
_STDIO_NAMES = (("stdout", "__stdout__"), ("stderr", "__stderr__"), ("stdin", "__stdin__"))


def open_stdio() -> Stdio:
    """Fresh ``sys.stdout``, ``sys.stderr`` and ``sys.stdin`` objects on fds 1, 2 and 0."""
    out = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    err = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    err.reconfigure(line_buffering=True)
    return out, err, open(0, encoding="utf-8", closefd=False)


def run_main(
    code: Any, path: str, stdio: Stdio | None = None
) -> int:  # pragma: no cover - runs in a sandbox child
    """Run ``code`` as ``__main__`` with fresh stdio objects; return the exit status.

    ``stdio``: unused objects :func:`open_stdio` made before this process was forked
    (a box's, see ``zygote.py``), else they are opened here.
    """
    # and as the originals (``sys.__stdout__``...), as in a fresh interpreter: the parent's
    # would be another object on the same fd, with the parent's buffer
    for names, stream in zip(_STDIO_NAMES, stdio or open_stdio(), strict=True):
        for name in names:
            setattr(sys, name, stream)
    sys.argv = ["-"]
    return run_as_main(code, path)


def run_as_main(code: Any, path: str) -> int:  # pragma: no cover - runs in a sandbox child
    """Run ``code`` (a code object, or source compiled here) as ``__main__``; return the status.

    The exit status follows CPython's: ``SystemExit`` codes, 1 after an uncaught
    exception (its traceback printed), atexit handlers run and streams flushed.
    Shared by warm ``code`` execs (supervisor) and the factory's spawned children.
    """
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    rc = 0
    try:
        if isinstance(code, str):
            code = compile(code, path, "exec")
        exec(code, main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            rc = 0
        elif isinstance(exc.code, int):
            rc = exc.code & 0xFF
        else:
            try:
                print(exc.code, file=sys.stderr)
            except Exception:
                pass
            rc = 1
    except BaseException:
        import traceback

        try:
            traceback.print_exc()
        except Exception:
            pass
        rc = 1
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    return rc
