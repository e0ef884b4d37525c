"""The in-sandbox grading harness, part 4: T's side of the process boundary.

The program shipped as an exec's ``code`` is stdlib-only parts joined into
one file, ``_prologue``, then ``_codec`` + ``_child_exec`` + ``_child`` |
``_spawner`` + ``_harness`` + ``_build`` + ``_compare`` + ``_asserts`` + ``_grader``,
followed by ``main(<payload path>)``; one data file holds the spec payload (JSON). This
part is T talking to its candidates; :mod:`._spawner` is where they come from.
Processes:

``T`` (trusted)
    the harness. It marks itself non-dumpable (``PR_SET_DUMPABLE 0``: no
    /proc/<pid>/mem, fd or environ access by same-uid processes), then reads
    the payload (tests, expected values, reference, nonce, candidate source)
    into memory and unlinks it and its own code file. It runs every
    comparison and all trusted test code and prints exactly one result
    frame, ``COLLIMATE_RESULT <nonce> <json>``, as the last thing it does.
    T takes the exec's connection to the node's pristine factory out of its
    environment (``COLLIMATE_ZYGOTE_FD``, see the node runtime README) and
    keeps it non-inheritable: nothing T starts can reach the factory.
``F`` / ``Z`` (where candidates come from)
    processes that never shared memory with the exec process (which may
    still hold the request). With a factory F, F forks every ``C`` on T's
    request: a warm process running the child part (in the node's warm
    harness, a few bytes entering it; else the ``marshal`` of
    ``_ZYGOTE_CODE``, compiled once by T). Without one, or once F fails,
    ``Z``: a *fresh* interpreter (fork + exec of ``sys.executable -I -S``)
    running the codec and child parts, started before T reads any secret
    when there is no factory; its stdio is /dev/null and it forks one ``C``
    per request, handing it the socket and pipes T passed over SCM_RIGHTS.
``C`` (candidate)
    keeps only its private request socket (fd 3) and capture pipes (fds 0/1/2),
    so it can never write to the exec's stdout; loads the candidate and
    answers calls. Results travel back as restricted-codec data that ``T``
    decodes into fresh builtin objects, under a per-call timeout; a dead or
    hung ``C`` is killed and the next test gets a fresh one.

The candidate never runs in a process that has seen the payload, and nothing
it prints reaches the exec's output except through the bounded tail in the
frame. If ``T`` has no factory and cannot start a fresh ``Z`` it refuses to
grade (fail closed).
"""

from __future__ import annotations  # collimate: strip

import builtins
import contextlib
import json
import marshal
import os
import select
import signal
import socket
import time

from ._child import (  # collimate: strip
    MAX_MESSAGE,
    MAX_STDOUT,
    TAIL_BYTES,
    _frame,
    _short,
)
from ._codec import CodecError, Unserializable, decode, encode  # collimate: strip
from ._spawner import _Zygote  # collimate: strip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


#: How much one read of a candidate's pipe asks for; a read that returns less emptied it.
_READ = 65536
#: The C scanner under ``json.loads``, without its whitespace regexes and frames (an
#: answer per call); a value that does not fill the text is refused like extra data.
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_value(text: str) -> Any:
    """The one JSON value ``text`` holds (C writes no whitespace around it).

    >>> _json_value('{"ok":true,"value":[1,2.5]}')
    {'ok': True, 'value': [1, 2.5]}
    >>> _json_value('[1] [2]')
    Traceback (most recent call last):
    ...
    ValueError: extra data after the answer
    """
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:  # (the scanner's way to say no value starts here)
        raise ValueError("the answer is not JSON") from None
    if end != len(text):
        raise ValueError("extra data after the answer")
    return value


class _Tail:
    """The last ``TAIL_BYTES`` of everything the candidate printed."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * TAIL_BYTES:
            del self.data[: len(self.data) - TAIL_BYTES]

    def text(self) -> str:
        return bytes(self.data[-TAIL_BYTES:]).decode("utf-8", "replace")


class Reply:
    """What one request to the candidate produced."""

    __slots__ = ("args_after", "detail", "etype", "status", "stdout", "value")

    def __init__(
        self,
        status: str,
        value: Any = None,
        detail: str = "",
        etype: str = "",
        stdout: str = "",
        args_after: list[Any] | None = None,
    ) -> None:
        self.status = status  # ok | error | timeout | crash
        self.value = value
        self.detail = detail
        self.etype = etype
        self.stdout = stdout
        self.args_after = args_after


class _Child:
    """T's handle on one candidate process."""

    def __init__(
        self, zygote: _Zygote, tail: _Tail, timeout: float, stdout_limit: int = MAX_STDOUT
    ) -> None:
        self.tail = tail
        self.stdout_limit = stdout_limit
        self.sock, theirs = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe()
        try:
            self.pid = zygote.spawn([theirs.fileno(), out_w, err_w, in_r], timeout)
        except BaseException:  # (a refused box is a BaseException in the worker)
            self.sock.close()
            for fd in (out_r, err_r, in_w):
                os.close(fd)
            raise
        finally:
            theirs.close()
            for fd in (out_w, err_w, in_r):
                os.close(fd)
        self.fds: dict[str, int | None] = {"out": out_r, "err": err_r, "in": in_w}
        self.names = {out_r: "out", err_r: "err", in_w: "in"}
        for fd in (out_r, err_r, in_w):
            os.set_blocking(fd, False)
        self.sock.setblocking(False)
        self.sock_fd = self.sock.fileno()
        # One poll set for the child's life (its socket and its output pipes), not fd
        # lists built for a select at every turn of every call.
        self.poller = select.poll()
        for fd in (self.sock_fd, out_r, err_r):
            self.poller.register(fd, select.POLLIN)
        self.rbuf = bytearray()
        self.stdout = bytearray()
        self.collect = False
        self.overflow = False
        self.dead = False
        self.next_id = 0

    def _close_fd(self, name: str) -> None:
        fd = self.fds.get(name)
        if fd is not None:
            self.fds[name] = None
            with contextlib.suppress(KeyError):
                self.poller.unregister(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    def _drain(self, name: str) -> None:
        """Read what the pipe holds; stop at a short read (the pipe is empty: no EAGAIN)."""
        fd = self.fds[name]
        if fd is None:
            return
        while True:
            try:
                chunk = os.read(fd, _READ)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._close_fd(name)
                return
            self.tail.feed(chunk)
            if name == "out" and self.collect:
                if len(self.stdout) + len(chunk) > self.stdout_limit:
                    self.overflow = True
                else:
                    self.stdout += chunk
            if len(chunk) < _READ:
                return

    def request(self, message: dict[str, Any], timeout: float, stdin: bytes = b"") -> Reply:
        """Send ``message`` and wait (at most ``timeout`` s) for C's answer.

        Interrupted (a ``BaseException`` raised while it waits: a worker's grade timeout
        lands wherever the grade is), the child dies with its pipes: half an exchange leaves
        nothing to reuse, and the caller may never get to its own clean-up.
        """
        try:
            return self._exchange(message, timeout, stdin)
        except BaseException:
            self.kill()
            raise

    def _exchange(self, message: dict[str, Any], timeout: float, stdin: bytes) -> Reply:
        if self.dead:
            return Reply("crash", detail="candidate process is gone")
        self.next_id += 1
        unsent = self._send_some(_frame(marshal.dumps(dict(message, id=self.next_id))))
        if unsent is None:  # (it usually fits: no poll round to send it)
            return self._died()
        if unsent:
            self.poller.modify(self.sock_fd, select.POLLIN | select.POLLOUT)
        if stdin and self.fds["in"] is not None:
            self.poller.register(self.fds["in"], select.POLLOUT)
        else:
            self._close_fd("in")
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return Reply("timeout", detail=f"no answer within {timeout:.3g}s")
            if self.overflow:
                self.kill()
                return Reply("error", detail="output limit exceeded")
            try:
                events = self.poller.poll(min(remaining, 1.0) * 1000)
            except InterruptedError:
                continue
            answered = False
            for fd, event in events:
                if fd != self.sock_fd:
                    name = self.names[fd]
                    if name == "in":
                        stdin = self._feed(fd, stdin)
                    else:
                        self._drain(name)
                else:
                    if event & select.POLLOUT:
                        unsent = self._send_some(unsent)
                        if unsent is None:
                            return self._died()
                        if not unsent:
                            self.poller.modify(fd, select.POLLIN)
                    answered = event & ~select.POLLOUT != 0  # an answer, or C hung up
            # The answer is read after the output: what C wrote before answering was in
            # its pipes when poll looked at them, so the reply's tail and stdout hold it all.
            if answered:
                reply = self._receive()
                if reply is not None:
                    return reply

    def _feed(self, fd: int, stdin: bytes) -> bytes:
        """Write what C's stdin pipe ``fd`` takes now; the rest (it is closed once all is in)."""
        try:
            stdin = stdin[os.write(fd, stdin[:65536]) :]
        except BlockingIOError:
            pass
        except OSError:
            stdin = b""
        if not stdin:
            self._close_fd("in")
        return stdin

    def _receive(self) -> Reply | None:
        """Read what the socket holds; C's answer once it is all there."""
        try:
            chunk = self.sock.recv(65536)  # (a 1 MiB buffer per answer costs an mmap)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            return self._died()
        if not self.rbuf and len(chunk) == 4 + int.from_bytes(chunk[:4], "big"):
            return self._answer(chunk[4:])  # the usual case: one whole answer in one read
        self.rbuf += chunk
        return self._parse()

    def _send_some(self, data: bytes) -> bytes | None:
        """Send what the socket takes now; the rest (``None``: the candidate is gone)."""
        try:
            return data[self.sock.send(data[:262144]) :]
        except BlockingIOError:
            return data
        except OSError:
            return None

    def _parse(self) -> Reply | None:
        if len(self.rbuf) < 4:
            return None
        size = int.from_bytes(self.rbuf[:4], "big")
        if size > MAX_MESSAGE:
            self.kill()
            return Reply("error", detail="answer too large")
        if len(self.rbuf) < 4 + size:
            return None
        body = bytes(self.rbuf[4 : 4 + size])
        del self.rbuf[: 4 + size]
        return self._answer(body)

    def _answer(self, body: bytes) -> Reply:
        """The reply C's answer ``body`` gives (an unreadable one kills C)."""
        try:
            message = _json_value(body.decode())
            if type(message) is not dict or message.get("id") != self.next_id:
                raise CodecError("answer out of sequence")
            if message.get("ok") is True:
                if "value" in message:
                    after = decode(message["args_after"]) if "args_after" in message else None
                    after = after if type(after) is list else None
                    return Reply("ok", value=decode(message["value"]), args_after=after)
                exit_code = message.get("exit", 0)
                exit_code = exit_code if type(exit_code) is int else 1
                detail = "" if exit_code == 0 else f"exit code {exit_code}"
                return Reply("ok", value=exit_code, detail=detail)
            etype = str(message.get("etype", ""))[:100]
            return Reply("error", detail=_short(str(message.get("error", ""))), etype=etype)
        except (CodecError, ValueError, KeyError, TypeError, RecursionError) as exc:
            self.kill()
            return Reply("error", detail=_short(f"unreadable answer: {exc}"))

    def _died(self) -> Reply:
        self._drain("out")
        self._drain("err")
        self.kill()
        return Reply("crash", detail="candidate process died")

    def kill(self) -> None:
        if not self.dead:
            self.dead = True
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        for key in ("out", "err", "in"):
            self._close_fd(key)
        with contextlib.suppress(OSError):
            self.sock.close()


#: How a call without keyword arguments sends them (``encode({})``; only ever read).
_NO_KWARGS: dict[str, list[Any]] = {"d": []}
#: The argument types whose in-place changes in the candidate reach the caller.
_CONTAINERS = (list, dict, set)


def _copy_back(originals: list[Any], after: list[Any]) -> None:
    """Apply the candidate's in-place changes to the caller's own containers."""
    if len(originals) != len(after):
        return
    for original, changed in zip(originals, after, strict=True):
        if type(original) is not type(changed):
            continue
        if type(original) is list:
            original[:] = changed
        elif type(original) in (dict, set):
            original.clear()
            original.update(changed)


class CandidateError(Exception):
    """The candidate raised, timed out or died during a call made by test code."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.detail or reply.status)
        self.reply = reply


def _candidate_exception(reply: Reply) -> Exception:
    # Re-raise as the same builtin exception class (built here, in T) so test
    # code that expects e.g. ValueError still works; never BaseException-only kinds.
    cls = getattr(builtins, reply.etype, None) if reply.status == "error" else None
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        with contextlib.suppress(Exception):
            exc = cls(reply.detail)
            exc.__cause__ = CandidateError(reply)
            return exc
    return CandidateError(reply)


class Runner:
    """Runs the candidate in fresh processes from the zygote, under a deadline."""

    def __init__(self, zygote: _Zygote, payload: dict[str, Any], deadline: float) -> None:
        self.zygote = zygote
        self.source: str = payload["source"]
        self.prelude: str = payload.get("prelude", "")
        self.module: str = payload.get("module", "candidate")
        self.per_call: float = float(payload.get("per_test_timeout", 6.0))
        self.deadline = deadline
        # what a run of the candidate asks C for: None runs the Python source; a
        # built program sets its own (see _build)
        self.run_request: dict[str, Any] | None = None
        self.stdout_limit = int(payload.get("output_limit") or MAX_STDOUT)
        self.run_limits: dict[str, Any] | None = payload.get("run_limits")
        self.cleanup: list[str] = []  # folders T made for this grade
        self.tail = _Tail()
        self.child: _Child | None = None
        self.load_failure: Reply | None = None
        self.pids: list[int] = []

    def _timeout(self) -> float:
        return min(self.per_call, self.deadline - time.monotonic())

    def _spawn(self, stdout_limit: int | None = None) -> _Child | Reply:
        if self.deadline - time.monotonic() <= 0:
            return Reply("timeout", detail="grading budget exhausted")
        try:
            child = _Child(
                self.zygote,
                self.tail,
                self.deadline - time.monotonic(),
                stdout_limit or self.stdout_limit,
            )
        except OSError as exc:
            return Reply("crash", detail=_short(f"could not start the candidate: {exc}"))
        self.pids.append(child.pid)
        return child

    def _loaded_child(self) -> _Child | Reply:
        if self.load_failure is not None:
            return self.load_failure
        if self.child is not None and not self.child.dead:
            return self.child
        child = self._spawn()
        if isinstance(child, Reply):
            return child
        load = {"op": "load", "module": self.module, "source": self.source}
        reply = child.request(dict(load, prelude=self.prelude), self._timeout())
        if reply.status != "ok":
            child.kill()
            reply.detail = "loading the candidate failed: " + reply.detail
            if reply.status != "timeout" or self.deadline > time.monotonic():
                self.load_failure = reply
            return reply
        self.child = child
        return child

    def call(
        self,
        entry: str,
        args: Any,
        kwargs: dict[str, Any] | None = None,
        *,
        mutable_args: bool = False,
    ) -> Reply:
        """Call ``entry(*args, **kwargs)`` in the candidate; the value arrives decoded.

        With ``mutable_args``, list, dict and set arguments get the candidate's
        in-place changes copied back (as plain data) after a successful call.
        """
        child = self._loaded_child()
        if isinstance(child, Reply):
            return child
        # only a list, dict or set argument takes changes back (``_copy_back``): for any
        # other, C need not encode the arguments again, nor T decode them
        mutable_args = mutable_args and any(type(arg) in _CONTAINERS for arg in args)
        try:
            request = {
                "op": "call",
                "entry": entry,
                "args": encode(list(args)),
                "kwargs": encode(dict(kwargs)) if kwargs else _NO_KWARGS,
                "return_args": mutable_args,
            }
        except Unserializable as exc:
            return Reply("error", detail=_short(f"cannot send the arguments: {exc}"))
        reply = child.request(request, self._timeout())
        if reply.status in ("timeout", "crash"):
            child.kill()
        if mutable_args and reply.status == "ok" and reply.args_after is not None:
            _copy_back(list(args), reply.args_after)
        return reply

    def run_program(self, stdin: str) -> Reply:
        """Run the candidate as a program in a fresh process; ``value`` is the exit code."""
        request = self.run_request
        if request is None:
            request = {"op": "run", "source": self.source, "prelude": self.prelude}
            if self.run_limits:
                request["limits"] = self.run_limits
        return self.run_once(request, stdin, self._timeout())

    def run_once(
        self, request: dict[str, Any], stdin: str, timeout: float, stdout_limit: int | None = None
    ) -> Reply:
        """Send ``request`` to a fresh candidate process, collecting its stdout."""
        child = self._spawn(stdout_limit)
        if isinstance(child, Reply):
            return child
        child.collect = True
        reply = child.request(request, timeout, stdin=stdin.encode("utf-8"))
        if child.overflow and reply.status == "ok":
            reply = Reply("error", detail="output limit exceeded")
        reply.stdout = bytes(child.stdout).decode("utf-8", "replace")
        child.kill()
        return reply

    def close(self) -> None:
        if self.child is not None:
            self.child.kill()
        for pid in self.pids:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        if self.cleanup:
            import shutil

            for folder in self.cleanup:
                shutil.rmtree(folder, ignore_errors=True)
