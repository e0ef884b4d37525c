"""Part 2 of the shipped harness: the candidate (C) and zygote (Z) processes.

Stdlib only. Candidates run this part (with :mod:`._codec`), as processes
the node's factory forks or forked by Z, a fresh interpreter that may have
to start once per grade, so it imports only C-level modules (no ``json``/``re``/
``enum``/``socket``): requests from T arrive as ``marshal`` data (T is
trusted), answers go back as JSON written by :func:`_to_json` (T parses them
with ``json``, never with ``marshal``). See :mod:`._harness` for the design.
"""

# ruff: noqa: SIM105  (contextlib would cost the zygote's start-up an import)
from __future__ import annotations  # collimate: strip

import _signal
import _socket
import marshal
import os
import sys

from ._child_exec import _exec_program, _set_limits  # collimate: strip
from ._codec import Unserializable, decode, encode  # collimate: strip

try:
    from _json import encode_basestring_ascii as _json_str
except ImportError:  # pragma: no cover - CPython always has _json
    from json.encoder import encode_basestring_ascii as _json_str

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
#: In the env of a process the node's factory spawns from this part: ``candidate``
#: serves as C directly (fds 0..4: program, stdout, stderr, socket, stdin), else Z.
ROLE_ENV = "COLLIMATE_HARNESS_ROLE"
_INT_SIZE = 4  # a C int in SCM_RIGHTS data, on every Linux target
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


def _to_json(value: Any) -> str:
    """JSON text for codec output and reply dicts (exact builtin types only)."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        return float.__repr__(value)  # the codec tags non-finite floats
    if kind is str:
        return str(_json_str(value))
    if kind is list:
        return "[" + ",".join([_to_json(item) for item in value]) + "]"
    if kind is dict:
        items = [_json_str(key) + ":" + _to_json(item) for key, item in value.items()]
        return "{" + ",".join(items) + "}"
    raise Unserializable(f"cannot write {kind.__name__} as JSON")


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def _recv_exact(sock: Any, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _next_request(sock: Any) -> bytes | None:
    """T's next request (its ``marshal`` data), or ``None`` once T has hung up.

    T sends a request and waits for its answer, so one read never holds a part of the
    next: it is usually the whole request, one ``recv`` where reading the size first
    took two.
    """
    data: bytes = sock.recv(65536)
    if len(data) < 4:
        rest = _recv_exact(sock, 4 - len(data)) if data else None
        if rest is None:
            return None
        data += rest
    size = int.from_bytes(data[:4], "big")
    if len(data) < 4 + size:
        rest = _recv_exact(sock, 4 + size - len(data))
        if rest is None:
            return None
        data += rest
    return data[4 : 4 + size]


# --------------------------------------------------------------------------- C: candidate


def _candidate_main(fds: list[int]) -> None:
    """Entry of a candidate process: rewire fds, then serve requests forever."""
    sock_fd, out_w, err_w, in_r = fds
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.dup2(sock_fd, 3)
    os.closerange(4, _max_fd())
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _seed_like_an_exec()
    # family and type given: no getsockname/getsockopt to find them (T made a socketpair)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, 3)
    sock.setblocking(True)
    state: dict[str, Any] = {"ns": None}
    while True:
        body = _next_request(sock)
        if body is None:
            os._exit(0)
        request = marshal.loads(body)
        try:
            reply = _serve(request, state)
        except BaseException as exc:  # the candidate's SystemExit and kin are answers too
            try:
                _remember_source(state.get("source", ""))
                import traceback

                traceback.print_exc()
            except BaseException:
                pass
            reply = {"ok": False, "kind": "exception", "etype": type(exc).__name__}
            reply["error"] = _describe(exc)
        reply["id"] = request.get("id")
        _flush_std()
        try:
            text = _to_json(reply)
        except Exception as exc:
            text = _to_json({"ok": False, "kind": "unserializable", "error": _describe(exc)})
        try:
            sock.sendall(_frame(text.encode("utf-8", "surrogatepass")))
        except BaseException:
            os._exit(0)


def _seed_like_an_exec() -> None:
    """Seed ``random`` from the exec's seed, as the node does for a plain exec.

    Keeps stochastic candidates reproducible (replay). The draws equal the
    property generator's only in stream, never in secrets: the candidate
    is told every input anyway.
    """
    import random

    try:
        random.seed(int(os.environ.get("COLLIMATE_SEED", ""), 16))
    except ValueError:
        pass


def _max_fd() -> int:
    try:
        return min(int(os.sysconf("SC_OPEN_MAX")), 65536)
    except (ValueError, OSError):
        return 1024


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()  # type: ignore[union-attr]
        except BaseException:
            pass


def _remember_source(source: str) -> None:
    # So tracebacks in the candidate's output show its lines. Imported only
    # when a traceback is printed: linecache pulls in tokenize and re.
    import linecache

    linecache.cache[CANDIDATE_FILE] = (len(source), None, source.splitlines(True), CANDIDATE_FILE)


def _load_module(name: str, source: str, prelude: str) -> dict[str, Any]:
    module = type(sys)(name)
    module.__file__ = CANDIDATE_FILE
    sys.modules[name] = module
    namespace = module.__dict__
    if prelude:
        exec(compile(prelude, "<prelude>", "exec"), namespace)
    exec(compile(source, CANDIDATE_FILE, "exec"), namespace)
    return namespace


def _serve(request: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op in ("load", "run"):
        state["source"] = request["source"]
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
        except Exception as exc:
            return {"ok": False, "kind": "unserializable", "error": _describe(exc)}
        reply = {"ok": True, "value": data}
        if request.get("return_args"):  # so in-place mutations reach the test code
            try:
                reply["args_after"] = encode(list(args))
            except Exception:
                pass
        return reply
    if op == "exec":  # a compiler or a built candidate (see _child_exec)
        return _exec_program(request)
    if op == "run":
        if request.get("limits"):
            _set_limits(request["limits"])
        module = type(sys)("__main__")
        module.__file__ = CANDIDATE_FILE
        sys.modules["__main__"] = module
        namespace = module.__dict__
        if request["prelude"]:
            exec(compile(request["prelude"], "<prelude>", "exec"), namespace)
        source = request["source"]
        code = 0
        try:
            exec(compile(source, CANDIDATE_FILE, "exec"), namespace)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                try:
                    print(exc.code, file=sys.stderr)
                except BaseException:
                    pass
        return {"ok": True, "exit": code}
    raise ValueError(f"unknown op {op!r}")


# --------------------------------------------------------------------------- Z: zygote


def _serve_as_spawned() -> None:
    """Entry of a process the node's factory spawned from this part: C, or else Z."""
    if os.environ.pop(ROLE_ENV, "") == "candidate":
        _candidate_main([3, 1, 2, 4])  # fds: see _spawner._factory_spawn
    _zygote_main(3)


def _zygote_main(ctl_fd: int) -> None:
    """Fork a candidate process per request; never touches the exec's stdout.

    Z exits when T closes the control socket; T also kills it (and every
    candidate's process group) before printing its verdict.
    """
    import random  # noqa: F401  (imported once here, re-seeded in every candidate)

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.dup2(ctl_fd, 3)
    os.closerange(4, _max_fd())
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # candidates are reaped by the kernel
    ctl = _socket.socket(fileno=3)
    space = _socket.CMSG_SPACE(8 * _INT_SIZE)
    while True:
        try:
            msg, ancdata, _flags, _addr = ctl.recvmsg(16, space)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        fds = []
        for level, kind, data in ancdata:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                for at in range(0, len(data) - len(data) % _INT_SIZE, _INT_SIZE):
                    fds.append(int.from_bytes(data[at : at + _INT_SIZE], sys.byteorder))
        pid = os.fork()
        if pid == 0:
            try:
                _candidate_main(list(fds))
            finally:
                os._exit(0)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        for fd in fds:
            os.close(fd)
        try:
            ctl.sendall(pid.to_bytes(8, "big", signed=True))
        except OSError:
            os._exit(0)
