"""Run pytest on many small repositories from one warm process (a script, run by path).

Starting Python and importing pytest is most of the cost of one run on a repository of a
few modules; this script imports pytest (and its default plugins) once, then forks a child
per repository, up to ``jobs`` at a time. Each child changes into its repository, puts it
first on ``sys.path`` (as ``python -m pytest`` does), runs ``pytest.main`` with its output
sent to the suite's report file, and exits with pytest's exit code.

It reads ``{"jobs": N, "suites": [{"dir": ..., "report": ..., "args": [...]}, ...]}`` as
JSON on stdin and writes ``{"exit_codes": [...]}`` on stdout. It imports nothing but the
standard library and pytest, so it starts fast: run it as ``python _pytest_runner.py``, not
with ``-m`` (that would import the ``collimate_envs`` package first).

>>> import json
>>> json.loads(json.dumps({"jobs": 2, "suites": []}))["jobs"]
2
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

__all__ = ["main"]


def _warm_up() -> Any:
    import pytest

    try:
        from _pytest.config import get_config

        get_config()  # imports the default plugins once, before any fork
    except Exception:  # an optimisation only: pytest.main imports them anyway
        pass
    return pytest


def _child(pytest: Any, suite: dict[str, Any]) -> None:
    """In the forked child: run one suite, never return."""
    code = 3
    try:
        report = os.open(suite["report"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(report, 1)
        os.dup2(report, 2)
        os.chdir(suite["dir"])
        sys.path.insert(0, suite["dir"])
        code = int(pytest.main(list(suite["args"])))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> int:
    request = json.load(sys.stdin)
    suites: list[dict[str, Any]] = request["suites"]
    jobs = max(1, int(request.get("jobs", 1)))
    pytest = _warm_up()
    exit_codes: list[int | None] = [None] * len(suites)
    running: dict[int, int] = {}
    pending = list(range(len(suites)))
    while pending or running:
        while pending and len(running) < jobs:
            index = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(pytest, suites[index])
            running[pid] = index
        pid, status = os.wait()
        exit_codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    json.dump({"exit_codes": exit_codes}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
