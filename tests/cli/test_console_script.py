"""The installed ``collimate`` console script, as a real process: serve, exec, an eval
interrupted (SIGINT) and killed (SIGKILL) and resumed, demo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.evaluation import evaluate

from . import _samples

SCRIPT = Path(sys.executable).parent / "collimate"
#: Runs the command that follows with SIGINT at its default: a test run started as a shell's
#: background job ignores SIGINT, and a program that starts so keeps ignoring Ctrl-C.
_WITH_DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the console script is not installed")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLIMATE_")}
    env["COLUMNS"] = "200"
    return env


def _run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        check=False,
    )


def test_version_and_module_entry_point() -> None:
    assert _run("--version").stdout.startswith("collimate-rl ")
    proc = subprocess.run(
        [sys.executable, "-m", "collimate_rl.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("collimate-rl ")


def test_serve_then_client_commands_then_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "node.sock"
    url = f"unix:{sock}"
    server = subprocess.Popen(
        [str(SCRIPT), "serve", "--socket", str(sock), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            health = _run("health", "--json", "--url", url)
            if health.returncode == 0:
                break
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, health.stderr
            time.sleep(0.2)
        assert json.loads(health.stdout)["status"] == "ok"
        run = _run("exec", "echo hi; exit 5", "--url", url)
        assert (run.returncode, run.stdout) == (5, "hi\n")
        assert "python3" in _run("templates", "--url", url).stdout
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
        if server.stderr is not None:
            server.stderr.close()
    assert code == 0
    assert not sock.exists()


def _wait_for_rows(out: Path, proc: subprocess.Popen[str], count: int) -> None:
    deadline = time.monotonic() + 120
    while not (out.exists() and len(_samples.result_rows(out)) >= count):
        assert proc.poll() is None, "the eval finished before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.slow
def test_eval_interrupted_then_killed_then_resumed(
    node_url: str, local_client: Any, tmp_path: Path
) -> None:
    # Each sample sleeps 0.3 s, one at a time: the eval is still running when stopped.
    samples = _samples.write(tmp_path / "samples.jsonl", _samples.rows(delay=0.3))
    out = tmp_path / "results.jsonl"
    argv = [
        str(SCRIPT),
        "eval",
        str(samples),
        "--task-set",
        "collimate-basic",
        "-k",
        "1,2,5",
        "--output",
        str(out),
        "--concurrency",
        "1",
        "--url",
        node_url,
    ]

    first = subprocess.Popen(
        [*_WITH_DEFAULT_SIGINT, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    _wait_for_rows(out, first, 2)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err
    assert "run the same command to resume" in err
    after_sigint = len(_samples.result_rows(out))

    second = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env()
    )
    _wait_for_rows(out, second, after_sigint + 2)
    second.kill()
    second.wait(timeout=30)
    after_kill = len(_samples.result_rows(out))
    assert after_sigint < after_kill < 20

    final = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, env=_env(), timeout=300, check=False
    )
    assert final.returncode == 0, final.stderr
    report = json.loads(final.stdout)
    assert report["resumed"] == after_kill and report["complete"] is True
    # No completion was graded twice, none was lost.
    assert sorted(r["index"] for r in _samples.result_rows(out)) == list(range(20))

    once = evaluate(
        _samples.rows(delay=0.3),
        task_set="collimate-basic",
        ks=(1, 2, 5),
        output=tmp_path / "once.jsonl",
        client=local_client,
    ).to_dict()
    for key in ("resumed", "output"):
        report.pop(key)
        once.pop(key)
    assert report == once


@pytest.mark.slow
def test_demo() -> None:
    run = _run("demo", "--groups", "1", "--group-size", "6", "--timeout", "1", timeout=300)
    assert run.returncode == 0, run.stderr
    assert "hostile completions scored 0.00 at most" in run.stdout
