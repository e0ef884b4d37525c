"""The test command the grader runs in a grading fork, and how its report comes back.

The default command runs pytest on the task's test ids through a short bootstrap:
it takes the repository off ``sys.path``, imports pytest and the report plugin (so
a module of the repository can shadow neither), puts the repository back, and runs
pytest with the plugin, which records every test's outcome by node id and writes
them as JSON. The shell around it keeps the runner's output to a bounded tail and
prints the report after a frame line with a per-grade nonce.

A row's or the env's ``test_cmd`` replaces the pytest call (a Django-style
``./tests/runtests.py ...``, a ``tox -e``...); its outcomes come from our report when
that command runs pytest (the plugin is on ``PYTEST_ADDOPTS``), else from its log
(pytest ``-rA`` or unittest ``-v`` lines).

>>> script = test_script("/sandbox", ["t.py::test_a"], nonce="n0", test_cmd=None)
>>> "python3 -c" in script and "t.py::test_a" in script
True
>>> parse_run("log line\\n@@COLREPORT n0 3\\n{\\"t.py::test_a\\": \\"passed\\"}", "n0")
({'t.py::test_a': 'passed'}, 'log line', 3)
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

__all__ = ["LOG_TAIL_BYTES", "parse_run", "test_script"]

#: How much of the runner's output the grade keeps (its tail).
LOG_TAIL_BYTES = 65536
_FRAME = "@@COLREPORT"
_PLUGIN_MODULE = "collimate_repo_report"

# The plugin: outcomes by node id; a failed setup or teardown is an error, an expected
# failure a pass (SWE-bench's rule), a module that did not import an error of its own.
_PLUGIN = r"""
import json as _json, os as _os

class CollimateRepoReport:
    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        key, was = report.nodeid, self.outcomes.get(report.nodeid)
        if report.when == "call":
            if hasattr(report, "wasxfail"):
                now = "passed" if report.skipped else "failed"
            else:
                now = report.outcome
        elif report.failed:
            now = "error"
        elif report.skipped and report.when == "setup":
            now = "skipped"
        else:
            return
        if was != "error":
            self.outcomes[key] = now

    def pytest_collectreport(self, report):
        if report.failed and report.nodeid:
            self.outcomes[report.nodeid] = "error"

    def pytest_sessionfinish(self, session):
        path = _os.environ.get("COLLIMATE_REPO_REPORT")
        if path:
            with open(path, "w") as out:
                _json.dump(self.outcomes, out)

def pytest_configure(config):
    if not config.pluginmanager.has_plugin("collimate-repo-report"):
        config.pluginmanager.register(CollimateRepoReport(), "collimate-repo-report")
"""

# Runs as ``python3 -c BOOT <args...>``: the repository (the current folder, first on
# sys.path) is put back only once pytest and the plugin are imported.
_BOOT = r"""
import os, sys
here = sys.path.pop(0) if sys.path and sys.path[0] in ("", os.getcwd()) else None
import json, pytest, _pytest.main, _pytest.runner, _pytest.reports
if here is not None:
    sys.path.insert(0, here)
sys.exit(pytest.main(sys.argv[1:]))
"""


def plugin_source() -> bytes:
    """The report plugin's module (written to a private folder of the grading fork)."""
    return _PLUGIN.encode("utf-8")


def test_script(
    workdir: str,
    test_ids: Sequence[str],
    *,
    nonce: str,
    test_cmd: str | None,
    private_dir: str = "/tmp/.collimate-grade",
) -> str:
    """The shell script of one grading run (see the module docstring)."""
    q = shlex.quote
    report = f"{private_dir}/report.json"
    if test_cmd is None:
        runner = (
            "python3 -c "
            + q(_BOOT)
            + " -p no:cacheprovider -q -rA "
            + " ".join(q(t) for t in test_ids)
        )
    else:
        runner = test_cmd
    return "\n".join(
        [
            f"cd {q(workdir)} || exit 97",
            f"export COLLIMATE_REPO_REPORT={q(report)}",
            f'export PYTHONPATH={q(private_dir)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
            f'export PYTEST_ADDOPTS="-p {_PLUGIN_MODULE}${{PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}}"',
            "export PYTHONDONTWRITEBYTECODE=1",
            f"rm -f {q(report)}",
            f"( {runner} ) > {q(private_dir)}/log 2>&1 < /dev/null",
            "code=$?",
            f"tail -c {LOG_TAIL_BYTES} {q(private_dir)}/log",
            f"printf '\\n%s %s %s\\n' {_FRAME} {q(nonce)} \"$code\"",
            f"[ -f {q(report)} ] && cat {q(report)}",
            "exit 0",
        ]
    )


def parse_run(output: str, nonce: str) -> tuple[dict[str, str] | None, str, int | None]:
    """``(outcomes or None, the runner's log tail, its exit code)`` from a grading run's output.

    ``None`` outcomes: the run wrote no report (a custom command without pytest, or a
    runner that died first); the caller reads the log instead.
    """
    marker = f"{_FRAME} {nonce} "
    at = output.rfind("\n" + marker)
    if at < 0:
        if output.startswith(marker):
            at = -1
        else:
            return None, output, None
    log = output[: max(at, 0)]
    rest = output[at + 1 + len(marker) :]
    code_text, _, report = rest.partition("\n")
    try:
        code: int | None = int(code_text.strip())
    except ValueError:
        code = None
    outcomes: dict[str, str] | None = None
    if report.strip():
        try:
            decoded = json.loads(report)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            outcomes = {str(k): str(v) for k, v in decoded.items()}
    return outcomes, log, code
