"""Part 5 of the shipped harness: grading modes and T's ``main``.

Stdlib only; runs only in the trusted process T. See :mod:`._harness`.
"""

from __future__ import annotations  # collimate: strip

import contextlib
import json
import math
import os
import sys
import time

from ._asserts import _compiled_block  # collimate: strip
from ._build import grade_program_exit, prepare_program, run_case  # collimate: strip
from ._child import (  # collimate: strip
    _PR_SET_DUMPABLE,
    DEFAULT_SEED,
    FRAME_VERSION,
    MAX_OUTCOMES,
    RESULT_PREFIX,
    _describe,
    _prctl,
    _safe_repr,
    _short,
)
from ._codec import decode  # collimate: strip
from ._compare import _as_lists, _io_same, same  # collimate: strip
from ._harness import (  # collimate: strip
    CandidateError,
    Reply,
    Runner,
    _candidate_exception,
)
from ._spawner import ZYGOTE_PART_END, _Zygote  # collimate: strip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# --------------------------------------------------------------------------- grading modes

#: The detail of a test an all-or-nothing grade did not run (``stop_on_failure``).
NOT_RUN = "not run: an earlier test failed and the reward is all-or-nothing"


class _Halt(BaseException):
    """Ends a test block at its first failing assert (a BaseException: test code's
    ``except Exception`` cannot swallow it)."""


class Grader:
    """Runs one payload's tests and collects per-test outcomes.

    With ``stop_on_failure`` in the payload (an all-or-nothing reward), the first
    test that does not pass ends the grade, as a benchmark's own ``check`` stops at
    its first failing assert: the reward is 0 whatever the rest would do, so the
    rest are recorded as failed with :data:`NOT_RUN`, and never call the candidate.
    """

    def __init__(self, payload: dict[str, Any], runner: Runner, seed: str) -> None:
        self.payload = payload
        self.runner = runner
        self.seed = seed
        self.outcomes: list[dict[str, Any]] = []
        self.passed = 0
        self.total = 0
        self.reward: float | None = None
        self.error: str | None = None
        self.extra: dict[str, Any] = {}  # more frame fields (compile_error, toolchain_missing)
        self.stop_on_failure = payload.get("stop_on_failure") is True
        self.stopped = False  # a test failed under ``stop_on_failure``: run no more

    def _skipped(self, name: str) -> bool:
        """Whether the grade has stopped; if so, ``name`` is recorded as not run."""
        if self.stopped:
            self.record(name, "fail", NOT_RUN)
        return self.stopped

    def record(
        self, name: str, status: str, detail: str = "", shown_input: str | None = None
    ) -> None:
        self.total += 1
        if status == "pass":
            self.passed += 1
        elif self.stop_on_failure:
            self.stopped = True
        if len(self.outcomes) < MAX_OUTCOMES:
            outcome = {"name": _short(name, 80), "status": status, "detail": _short(detail)}
            if shown_input is not None:
                outcome["input"] = shown_input
            self.outcomes.append(outcome)

    def record_reply(self, name: str, reply: Reply, ok: bool, shown_input: str | None) -> None:
        if reply.status == "ok":
            status = "pass" if ok else "fail"
            detail = "" if ok else _short("got " + _safe_repr(reply.value))
        else:
            status, detail = reply.status, reply.detail
        self.record(name, status, detail, shown_input)

    def run(self) -> None:
        kind = self.payload["kind"]
        handler: Callable[[], None] = {
            "calls": self._calls,
            "asserts": self._asserts,
            "property": self._property,
            "io": self._io,
            "custom": self._custom,
            "program_exit": lambda: grade_program_exit(self),
        }[kind]
        handler()

    def _calls(self) -> None:
        tol = self.payload.get("float_tolerance")
        loose = bool(self.payload.get("loose_sequences", False))
        lists = bool(self.payload.get("tuples_as_lists", False))
        entry = self.payload["entry"]
        for index, test in enumerate(self.payload["tests"]):
            if self._skipped(f"test {index}"):
                continue
            args = decode(test["args"])
            want = decode(test["expected"])
            reply = self.runner.call(entry, args, decode(test.get("kwargs", {"d": []})))
            got = _as_lists(reply.value) if lists else reply.value
            wants = [want, *(decode(alt) for alt in test.get("any_of", []))]
            ok = reply.status == "ok" and any(same(got, w, tol=tol, loose=loose) for w in wants)
            self.record_reply(f"test {index}", reply, ok, _safe_repr(args))

    def _property(self) -> None:
        import copy
        import random

        p = self.payload
        random.seed(int(self.seed, 16))
        namespace: dict[str, Any] = {"random": random, "__name__": "reference"}
        generator = eval(f"lambda: ({p['generator']})", namespace)
        inputs: list[tuple[Any, str | None]] = []
        for _ in range(int(p["k"])):  # draw every input first: CRN does not depend on answers
            try:
                inputs.append((generator(), None))
            except Exception as exc:
                self.error = "the generator raised " + _describe(exc)
                inputs.append((None, self.error))
        reference = _reference(p["reference"], p["entry"])
        for index, (x, problem) in enumerate(inputs):
            if self._skipped(f"trial {index}"):
                continue
            shown = _safe_repr(x)
            if problem is not None:
                self.record(f"trial {index}", "error", problem, shown)
                continue
            try:
                want = reference(copy.deepcopy(x))
            except Exception as exc:
                self.record(
                    f"trial {index}", "error", "the reference raised " + _describe(exc), shown
                )
                continue
            reply = self.runner.call(p["entry"], (x,))
            ok = reply.status == "ok" and same(reply.value, want, tol=p.get("float_tolerance"))
            self.record_reply(f"trial {index}", reply, ok, shown)

    def _io(self) -> None:
        p = self.payload
        strip, tol = bool(p.get("strip_whitespace", True)), p.get("float_tolerance")
        if not prepare_program(self, len(p["cases"])):  # another language: build it once
            return
        for index, case in enumerate(p["cases"]):
            if self._skipped(f"case {index}"):
                continue
            reply = run_case(self, case["stdin"])
            if reply is None:  # the sandbox lacks the program's runtime
                return
            ok = reply.status == "ok" and _io_same(
                reply.stdout, case["expected"], strip=strip, tol=tol
            )
            shown = _safe_repr(case["stdin"])
            if reply.status == "ok":
                detail = "" if ok else "got " + _safe_repr(reply.stdout)
                if reply.detail:
                    detail = (reply.detail + "; " + detail).rstrip("; ")
                self.record(f"case {index}", "pass" if ok else "fail", detail, shown)
            else:
                self.record(f"case {index}", reply.status, reply.detail, shown)

    def _asserts(self) -> None:
        p = self.payload
        namespace: dict[str, Any] = {"__name__": "tests"}
        if p.get("setup"):
            exec(compile(p["setup"], "<setup>", "exec"), namespace)
        for name in {*p.get("proxied", []), p["entry"]}:
            if name == p["entry"] or name not in namespace:
                namespace[name] = _Proxy(self, name)
        namespace["candidate"] = _Proxy(self, p["entry"])
        for index, block in enumerate(p["blocks"]):
            if self.stopped:
                self._not_run(index, block)
            else:
                self._run_block(index, block, dict(namespace))

    def _not_run(self, index: int, block: dict[str, Any]) -> None:
        """Record a block an all-or-nothing grade skipped: its asserts, as counted."""
        try:
            static = _compiled_block(block["code"], index)[1]
        except (SyntaxError, ValueError):
            static = 1
        for _ in range(max(static, 1)):
            self._skipped(block.get("name", f"block {index}"))

    def _run_block(self, index: int, block: dict[str, Any], namespace: dict[str, Any]) -> None:
        source = block["code"]
        records: list[tuple[str, str, str]] = []

        def check(lineno: int, ok: Any, exc: BaseException | None) -> None:
            if self.stopped:  # the test code caught the halt (``except:``): stop it again
                raise _Halt
            label = f"{block.get('name', f'block {index}')}:{lineno}"
            if exc is None:
                records.append((label, "pass" if ok else "fail", ""))
            elif isinstance(exc, CandidateError):
                records.append((label, exc.reply.status, exc.reply.detail))
            elif isinstance(exc.__cause__, CandidateError):
                records.append((label, "error", _describe(exc)))
            else:
                records.append((label, "error", _describe(exc)))
            if self.stop_on_failure and records[-1][1] != "pass":
                self.stopped = True  # (recorded after the block) no more asserts, no calls
                raise _Halt

        try:
            code, static = _compiled_block(source, index)
        except (SyntaxError, ValueError) as exc:
            self.error = "the test code does not compile: " + _describe(exc)
            self.record(f"block {index}", "error", self.error)
            return
        namespace["__collimate_check__"] = check
        failure: BaseException | None = None
        try:
            exec(code, namespace)
        except _Halt:
            pass
        except Exception as exc:
            failure = exc
        if self.stopped and failure is None:  # the asserts up to the halt count, not the rest
            for label, status, detail in records:
                self.record(label, status, detail)
            for _ in range(static - len(records)):
                self._skipped(f"block {index}")
            return
        if failure is None:
            # The test code's own flow decided which asserts ran (``try: f(bad);
            # assert False / except E: pass`` runs none): each that ran counts,
            # and a block that ran none passed by finishing.
            for label, status, detail in records:
                self.record(label, status, detail)
            if not records:
                self.record(f"block {index}", "pass")
            return
        # An exception outside any assert aborts the block: nothing in it counts.
        detail = _describe(failure)
        status = failure.reply.status if isinstance(failure, CandidateError) else "error"
        count = max(len(records) + 1, static)
        for label, _status, _detail in records:
            self.record(label, "fail", "block aborted: " + detail)
        self.record(f"block {index}", status, detail)
        for _ in range(count - len(records) - 1):
            self.record(f"block {index}", "fail", "assert not reached")

    def _custom(self) -> None:
        import io

        namespace: dict[str, Any] = {"__name__": "grader"}
        exec(compile(self.payload["script"], "<grader>", "exec"), namespace)
        api = GraderAPI(self)
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            result = namespace["grade"](api)
        if isinstance(result, tuple) and len(result) == 2:
            passed, total = int(result[0]), int(result[1])
            if not 0 <= passed <= total:
                raise ValueError(f"grade() returned an impossible ({passed}, {total})")
            if not self.outcomes:
                for i in range(total):
                    self.record(f"check {i}", "pass" if i < passed else "fail")
            else:
                self.passed, self.total = passed, total
        else:
            value = float(result)
            if math.isnan(value):
                value = 0.0
            self.reward = min(1.0, max(0.0, value))
            if not self.outcomes:
                self.record(
                    "custom", "pass" if self.reward >= 1.0 else "fail", f"reward {self.reward}"
                )


class _Proxy:
    """Stands for a candidate function inside trusted test code."""

    def __init__(self, grader: Grader, name: str) -> None:
        self._grader = grader
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._grader.stopped:  # test code that caught the halt calls no more
            raise _Halt
        reply = self._grader.runner.call(self._name, args, kwargs, mutable_args=True)
        if reply.status == "ok":
            return reply.value
        raise _candidate_exception(reply)

    def __repr__(self) -> str:
        return f"<candidate {self._name}>"


class GraderAPI:
    """What a custom grader script's ``grade(api)`` gets."""

    def __init__(self, grader: Grader) -> None:
        self._grader = grader
        self.source: str = grader.runner.source
        self.seed: str = grader.seed
        import random

        self.random = random.Random(int(grader.seed, 16))

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the candidate's ``name``; raises if it raised, hung or died."""
        reply = self._grader.runner.call(name, args, kwargs, mutable_args=True)
        if reply.status == "ok":
            return reply.value
        raise _candidate_exception(reply)

    def run_program(self, stdin: str = "") -> tuple[str, int | None]:
        """Run the candidate as a program; returns ``(stdout, exit code or None)``."""
        reply = self._grader.runner.run_program(stdin)
        exit_code = reply.value if reply.status == "ok" else None
        return reply.stdout, exit_code

    def record(self, name: str, ok: bool, detail: str = "") -> None:
        """Add a per-test outcome (the reward still comes from ``grade``'s return)."""
        self._grader.record(name, "pass" if ok else "fail", detail)


def _reference(source: str, entry: str) -> Callable[[Any], Any]:
    import ast
    import random
    import textwrap

    namespace: dict[str, Any] = {"random": random, "__name__": "reference"}
    try:
        tree = ast.parse(textwrap.dedent(source))
        defined = [
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
    except SyntaxError:
        defined = []
    for name in (entry, "reference", "ref"):
        if name in defined:
            exec(compile(textwrap.dedent(source), "<reference>", "exec"), namespace)
            return namespace[name]  # type: ignore[no-any-return]
    body = textwrap.indent(textwrap.dedent(source), "    ")
    exec(compile(f"def _ref(x):\n{body}\n", "<reference>", "exec"), namespace)
    return namespace["_ref"]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- T: main


def _read_and_unlink(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with contextlib.suppress(OSError):
        os.unlink(path)
    return text


def frame_line(nonce: str, frame: dict[str, Any]) -> bytes:
    """The verdict as the one line the harness prints (with a newline before it)."""
    line = f"\n{RESULT_PREFIX} {nonce} {json.dumps(frame, separators=(',', ':'))}\n"
    return line.encode("utf-8", "replace")


def _emit(nonce: str, frame: dict[str, Any]) -> None:
    data = frame_line(nonce, frame)
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
    while data:
        try:
            data = data[os.write(1, data) :]
        except InterruptedError:
            continue
        except OSError:
            return


def _own_source() -> str | None:
    """The zygote's part of an unsplit program (codec and child, as text), or ``None``."""
    path = globals().get("__file__")
    if not sys.executable or not isinstance(path, str):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    head, marker, _ = text.partition("\n" + ZYGOTE_PART_END + "\n")
    return head if marker and "def _zygote_main" in head else None


def _warm_entry() -> Any:
    """In the node's warm harness: code that runs this module's child part, or ``None``.

    A process the node's factory spawns has this module too (both come from
    the template's fork-server), so it needs a few bytes, not the child part.
    """
    digest, name = globals().get("WARM_DIGEST"), globals().get("__name__")
    if not isinstance(digest, str) or name == "__main__":
        return None
    source = (
        f"import sys\n_h = sys.modules.get({name!r})\n"
        f"if getattr(_h, 'WARM_DIGEST', None) != {digest!r}:\n"
        "    raise SystemExit('collimate: the factory has no matching warm harness')\n"
        "_h._serve_as_spawned()\n"
    )
    return compile(source, "<collimate-warm>", "exec")


def main(payload_path: str) -> None:
    """Grade: start the zygote, read and unlink the payload, run, print the frame."""
    started = time.monotonic()
    _prctl(_PR_SET_DUMPABLE, 0)
    code = globals().get("_ZYGOTE_CODE")  # the shipped program's compiled child part
    try:
        source = None if code is not None else _own_source()
        zygote: _Zygote | None = _Zygote(source, code, _warm_entry())
    except OSError:
        zygote = None
    try:
        payload = json.loads(_read_and_unlink(payload_path))
    except (OSError, ValueError) as exc:
        if zygote is not None:
            zygote.close()
        print(f"collimate harness: cannot read the payload: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    code_file = os.environ.get("COLLIMATE_CODE_FILE")
    if code_file:
        with contextlib.suppress(OSError):
            os.unlink(code_file)
    seed = os.environ.get("COLLIMATE_SEED", "")
    _emit(payload["nonce"], grade_payload(payload, zygote, seed, started))


def grade_payload(
    payload: dict[str, Any], zygote: Any, seed: str, started: float
) -> dict[str, Any]:
    """The verdict frame for ``payload``: run its tests against candidates from ``zygote``.

    ``zygote`` spawns the candidate processes (``spawn(fds, timeout) -> pid``,
    ``close()``); ``None`` fails closed. Closes the zygote. A node's trusted
    worker calls this in-process with its own zygote (``collimate_rl.node``).
    """
    try:
        int(seed, 16)
    except ValueError:
        seed = DEFAULT_SEED
    frame: dict[str, Any] = {"v": FRAME_VERSION, "passed": 0, "total": 0, "tests": []}
    if zygote is None:
        # Fail closed: without a pristine zygote the candidate could inherit secrets.
        frame["error"] = "harness error: cannot start a fresh interpreter for the candidate"
        frame["output_tail"] = ""
        return frame
    runner = Runner(zygote, payload, started + float(payload.get("budget_seconds", 25.0)))
    grader = Grader(payload, runner, seed)
    try:
        grader.run()
    except Exception as exc:
        grader.error = "grader error: " + _describe(exc)
    finally:
        runner.close()
        zygote.close()
    frame.update(
        passed=grader.passed,
        total=grader.total,
        tests=grader.outcomes,
        output_tail=runner.tail.text(),
    )
    if grader.reward is not None:
        frame["reward"] = grader.reward
    if grader.error:
        frame["error"] = grader.error
    frame.update(grader.extra)
    return frame
