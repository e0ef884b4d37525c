"""Part 2a of the shipped harness: a candidate process runs another program.

Stdlib only, and only modules a fresh zygote loads fast (see :mod:`._child`). The trusted
process T asks a candidate process C (which never saw the payload) to run a compiler or a
built candidate: C forks G, G sets the limits T chose, keeps only fds 0, 1 and 2 (C's
capture pipes, so G's output reaches T and never the exec's stdout) and execs the program;
C answers with G's exit status. G stays in C's process group, so T's kill of a timed-out
candidate reaches it. See :mod:`._build` for T's side.
"""

# ruff: noqa: SIM105  (contextlib would cost the zygote's start-up an import)
from __future__ import annotations  # collimate: strip

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: ``etype`` of an answer whose program could not start: the tool is not on ``PATH``.
TOOLCHAIN_MISSING = "ToolchainMissing"
#: ``etype`` of an answer whose program could not start for another reason.
EXEC_FAILED = "ExecFailed"


def _set_limits(limits: dict[str, Any]) -> None:
    """Lower G's rlimits to ``limits`` (never above what the exec already allows)."""
    import resource

    table = (
        ("memory", resource.RLIMIT_AS),
        ("stack", resource.RLIMIT_STACK),
        ("cpu", resource.RLIMIT_CPU),
    )
    for key, which in table:
        value = limits.get(key)
        if type(value) is not int or value <= 0:
            continue
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def _exec_program(request: dict[str, Any]) -> dict[str, Any]:
    """Run ``request["argv"]`` in ``request["cwd"]`` under its limits; report how it ended."""
    argv = [str(arg) for arg in request["argv"]]
    report_r, report_w = os.pipe2(os.O_CLOEXEC)  # carries why the exec failed, if it did
    pid = os.fork()
    if pid == 0:  # G
        try:
            os.close(report_r)
            os.chdir(str(request["cwd"]))
            if request.get("merge_stderr"):
                os.dup2(1, 2)
            for key, value in (request.get("env") or {}).items():
                os.environ.setdefault(str(key), str(value))
            _set_limits(request.get("limits") or {})
            os.closerange(3, report_w)
            os.closerange(report_w + 1, 65536)
            os.execvp(argv[0], argv)
        except BaseException as exc:
            if isinstance(exc, FileNotFoundError) and "/" not in argv[0]:
                text = f"{TOOLCHAIN_MISSING}\n`{argv[0]}` is not on the sandbox's PATH"
            else:
                text = f"{EXEC_FAILED}\ncannot run `{argv[0]}`: {type(exc).__name__}: {exc}"
            try:
                os.write(report_w, text.encode("utf-8", "replace")[:4000])
            except BaseException:
                pass
        os._exit(127)
    os.close(report_w)
    failure = b""
    while True:
        chunk = os.read(report_r, 4096)
        if not chunk:
            break
        failure += chunk
    os.close(report_r)
    _pid, status = os.waitpid(pid, 0)
    if failure:
        kind, _, detail = failure.decode("utf-8", "replace").partition("\n")
        return {"ok": False, "kind": "exec", "etype": kind, "error": detail, "tool": argv[0]}
    return {"ok": True, "exit": os.waitstatus_to_exitcode(status)}
