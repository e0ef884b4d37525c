"""Part 2 of the shipped harness: the candidate (C) and zygote (Z) processes.

Stdlib only. Z runs this part (with :mod:`._codec`) in a fresh interpreter;
see :mod:`._harness` for the whole design.
"""

from __future__ import annotations  # collimate: strip

import contextlib
import json
import os
import signal
import socket
import struct
import sys
import types

from ._codec import decode, encode  # collimate: strip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RESULT_PREFIX = "COLLIMATE_RESULT"
FRAME_VERSION = 1
TAIL_BYTES = 4096
DETAIL_CHARS = 300
INPUT_CHARS = 200
MAX_OUTCOMES = 256
MAX_MESSAGE = 32 << 20
MAX_STDOUT = 8 << 20
DEFAULT_SEED = "0" * 64
CANDIDATE_FILE = "candidate.py"
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:  # no ctypes or not Linux: the sandbox still isolates
        pass


def _short(text: str, limit: int = DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(exc: BaseException) -> str:
    try:
        return _short(f"{type(exc).__name__}: {exc}")
    except Exception:
        return type(exc).__name__


def _safe_repr(value: Any, limit: int = INPUT_CHARS) -> str:
    try:
        return _short(repr(value), limit)
    except Exception:
        return "<unprintable>"


# --------------------------------------------------------------------------- framing


def _frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    return struct.pack("!I", len(data)) + data


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


# --------------------------------------------------------------------------- C: candidate


def _candidate_main(fds: list[int]) -> None:
    """Entry of a candidate process: rewire fds, then serve requests forever."""
    sock_fd, out_w, err_w, in_r = fds
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.dup2(sock_fd, 3)
    os.closerange(4, _max_fd())
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _seed_like_an_exec()
    sock = socket.socket(fileno=3)
    sock.setblocking(True)
    state: dict[str, Any] = {"ns": None}
    while True:
        head = _recv_exact(sock, 4)
        if head is None:
            os._exit(0)
        body = _recv_exact(sock, struct.unpack("!I", head)[0])
        if body is None:
            os._exit(0)
        request = json.loads(body)
        try:
            reply = _serve(request, state)
        except BaseException as exc:  # the candidate's SystemExit and kin are answers too
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()
            reply = {"ok": False, "kind": "exception", "etype": type(exc).__name__}
            reply["error"] = _describe(exc)
        reply["id"] = request.get("id")
        _flush_std()
        try:
            sock.sendall(_frame(reply))
        except BaseException:
            os._exit(0)


def _seed_like_an_exec() -> None:
    """Seed ``random`` from the exec's seed, as the node does for a plain exec.

    Keeps stochastic candidates reproducible (replay). The draws equal the
    property generator's only in stream, never in secrets: the candidate
    is told every input anyway.
    """
    import random

    with contextlib.suppress(ValueError):
        random.seed(int(os.environ.get("COLLIMATE_SEED", ""), 16))


def _max_fd() -> int:
    try:
        return min(int(os.sysconf("SC_OPEN_MAX")), 65536)
    except (ValueError, OSError):
        return 1024


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(BaseException):
            stream.flush()  # type: ignore[union-attr]


def _remember_source(source: str) -> None:
    import linecache  # so tracebacks in the candidate's output show its lines

    linecache.cache[CANDIDATE_FILE] = (len(source), None, source.splitlines(True), CANDIDATE_FILE)


def _load_module(name: str, source: str, prelude: str) -> dict[str, Any]:
    module = types.ModuleType(name)
    module.__file__ = CANDIDATE_FILE
    sys.modules[name] = module
    namespace = module.__dict__
    if prelude:
        exec(compile(prelude, "<prelude>", "exec"), namespace)
    _remember_source(source)
    exec(compile(source, CANDIDATE_FILE, "exec"), namespace)
    return namespace


def _serve(request: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "load":
        state["ns"] = _load_module(request["module"], request["source"], request["prelude"])
        return {"ok": True}
    if op == "call":
        namespace = state["ns"]
        entry = request["entry"]
        target = namespace.get(entry)
        if target is None and isinstance(namespace.get("Solution"), type):
            target = getattr(namespace["Solution"](), entry)  # LeetCode-style classes
        if target is None:
            raise NameError(f"the candidate defines no {entry!r}")
        args = decode(request["args"])
        kwargs = decode(request["kwargs"])
        value = target(*args, **kwargs)
        try:
            data = encode(value)
            json.dumps(data)
        except Exception as exc:
            return {"ok": False, "kind": "unserializable", "error": _describe(exc)}
        reply = {"ok": True, "value": data}
        if request.get("return_args"):  # so in-place mutations reach the test code
            with contextlib.suppress(Exception):
                reply["args_after"] = json.loads(json.dumps(encode(list(args))))
        return reply
    if op == "run":
        module = types.ModuleType("__main__")
        module.__file__ = CANDIDATE_FILE
        sys.modules["__main__"] = module
        namespace = module.__dict__
        if request["prelude"]:
            exec(compile(request["prelude"], "<prelude>", "exec"), namespace)
        source = request["source"]
        _remember_source(source)
        code = 0
        try:
            exec(compile(source, CANDIDATE_FILE, "exec"), namespace)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                with contextlib.suppress(BaseException):
                    print(exc.code, file=sys.stderr)
        return {"ok": True, "exit": code}
    raise ValueError(f"unknown op {op!r}")


# --------------------------------------------------------------------------- Z: zygote


def _zygote_main(ctl_fd: int) -> None:
    """Fork a candidate process per request; never touches the exec's stdout."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    import random  # noqa: F401  (imported once here, re-seeded in every candidate)

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.dup2(ctl_fd, 3)
    os.closerange(4, _max_fd())
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # candidates are reaped by the kernel
    ctl = socket.socket(fileno=3)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 16, 8)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            try:
                _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
                _candidate_main(list(fds))
            finally:
                os._exit(0)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        for fd in fds:
            os.close(fd)
        try:
            ctl.sendall(struct.pack("!q", pid))
        except OSError:
            os._exit(0)
