"""Part 3a of the shipped harness: a candidate in another language, T's side.

When the payload carries a ``program`` (see :func:`collimate_rl.grading.languages.program_payload`),
T writes the candidate's source into a fresh folder, then asks a candidate process C (one
that never saw the payload) to run the compiler there under the compile limits: its output
comes back to T only, through C's capture pipes. A failed compile is the candidate's
failure, a ``compile_error`` outcome. Each case then runs in a new C that execs the built
program with the case's input on its stdin (:mod:`._child_exec`); its exit status becomes
the case's status: a non-zero exit is a runtime error, a signal a crash, the CPU limit a
timeout. A tool missing from the sandbox is neither: it stops the grade and the frame says
which tool, so the client can raise a clear error.
"""

from __future__ import annotations  # collimate: strip

import math
import os
import time

from ._child import DETAIL_CHARS, _short  # collimate: strip
from ._child_exec import TOOLCHAIN_MISSING  # collimate: strip
from ._harness import Reply  # collimate: strip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The outcome status of a candidate that does not compile.
COMPILE_ERROR = "compile_error"


def _cpu_seconds(timeout: float) -> int:
    # a safety net for processes that left the group T kills: two CPUs' worth of the wall time
    return math.ceil(2 * max(timeout, 0.1)) + 1


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _write_sources(program: dict[str, Any]) -> None:
    folder = program["dir"]
    os.makedirs(folder, mode=0o700)
    for name, text in program["files"].items():
        path = os.path.join(folder, os.path.basename(name))
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _short(line.strip(), 160)
    return ""


def _missing(grader: Any, reply: Reply) -> bool:
    """Stop the grade when the sandbox lacks a tool (not the candidate's fault)."""
    if reply.status == "error" and reply.etype == TOOLCHAIN_MISSING:
        grader.error = "toolchain missing: " + reply.detail
        grader.extra["toolchain_missing"] = reply.detail
        return True
    return False


def prepare_program(grader: Any, cases: int) -> bool:
    """Build the payload's program, if it has one; ``False`` when the grade stops here.

    ``cases`` is how many tests a compile error fails.
    """
    program = grader.payload.get("program")
    if program is None:
        return True
    runner = grader.runner
    try:
        _write_sources(program)
    except OSError as exc:
        grader.error = f"harness error: cannot write the source: {exc}"
        return False
    runner.cleanup.append(program["dir"])
    argv = program.get("compile")
    if argv:
        limits = program["compile_limits"]
        timeout = min(float(limits["timeout"]), runner.deadline - time.monotonic())
        request = {
            "op": "exec",
            "argv": argv,
            "cwd": program["dir"],
            "merge_stderr": True,
            "env": program.get("env") or {},
            "limits": {"memory": int(limits["memory"]), "cpu": _cpu_seconds(timeout)},
        }
        reply = runner.run_once(request, "", timeout, int(limits["output"]))
        if _missing(grader, reply):
            return False
        failure = _compile_failure(reply, timeout)
        if failure is not None:
            output = reply.stdout.strip()
            if reply.status == "ok" and reply.value > 0:  # the compiler's own verdict
                detail, headline = output or failure, _first_line(output) or failure
            else:  # stopped by a limit: say which first
                detail, headline = f"{failure}\n{output}".strip(), failure
            grader.record("compile", COMPILE_ERROR, _short(detail, DETAIL_CHARS))
            grader.total = max(grader.total, cases)
            grader.error = "compile error: " + headline
            grader.extra[COMPILE_ERROR] = True
            return False
    limits = dict(program.get("run_limits") or {})
    limits["cpu"] = _cpu_seconds(runner.per_call)
    runner.run_request = {
        "op": "exec",
        "argv": program["run"],
        "cwd": program["dir"],
        "limits": limits,
        "env": program.get("env") or {},
    }
    return True


def _compile_failure(reply: Reply, timeout: float) -> str | None:
    """Why the compile failed, or ``None`` if it succeeded."""
    if reply.status == "ok":
        code = reply.value
        if code == 0:
            return None
        if type(code) is int and code < 0:
            return f"the compiler was killed by {_signal_name(-code)}"
        return f"the compiler exited with code {code}"
    if reply.status == "timeout":
        return f"the compiler did not finish within {timeout:.3g}s"
    return "the compiler failed: " + (reply.detail or reply.status)


def run_case(grader: Any, stdin: str) -> Reply | None:
    """Run the candidate once; a built program's exit status becomes the reply's status.

    ``None`` when the sandbox lacks the program's runtime (the grade stops).
    """
    runner = grader.runner
    reply: Reply = runner.run_program(stdin)
    if runner.run_request is None:
        return reply
    if _missing(grader, reply):
        return None
    if reply.status != "ok" or reply.value == 0:
        return reply
    code = reply.value
    if type(code) is int and code < 0:
        import signal

        status = "timeout" if -code == signal.SIGXCPU else "crash"
        detail = (
            "CPU time limit exceeded" if status == "timeout" else f"killed by {_signal_name(-code)}"
        )
        failed = Reply(status, detail=detail)
    else:
        failed = Reply("error", detail=f"exit code {code}")
    failed.stdout = reply.stdout
    return failed


def grade_program_exit(grader: Any) -> None:
    """MultiPL-E: the program holds its own tests; it passes when it exits with 0."""
    if not prepare_program(grader, 1):
        return
    reply = run_case(grader, "")
    if reply is None:
        return
    if reply.status == "ok" and reply.value == 0:
        grader.record("program", "pass")
    elif reply.status in ("ok", "error"):
        detail = reply.detail or f"exit code {reply.value}"
        if reply.status == "error" and reply.etype:
            detail = f"{reply.etype}: {detail}" if not detail.startswith(reply.etype) else detail
        grader.record("program", "fail", detail)
    else:
        grader.record("program", reply.status, reply.detail)
