"""Every client command in-process against the shared local node (``--url``), bad input included."""

from __future__ import annotations

import io
import json
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from collimate_envs.tasks import load_task_set

from . import _samples
from .conftest import Run

Cli = Callable[..., Run]
TASK = "basic/count-vowels"


@pytest.fixture(scope="module")
def task() -> Any:
    return load_task_set("collimate-basic")[TASK]


@pytest.fixture
def good_file(tmp_path: Path, task: Any) -> Path:
    path = tmp_path / "good.md"
    path.write_text(_samples.fence(task.reference_solution))
    return path


@pytest.fixture
def bad_file(tmp_path: Path, task: Any) -> Path:
    path = tmp_path / "bad.py"
    path.write_text(task.wrong_solution)
    return path


# -- the command itself -------------------------------------------------------


def test_help_lists_every_command_and_the_exit_codes(cli: Cli) -> None:
    run = cli("--help")
    assert run.code == 0
    for name in (
        "serve",
        "health",
        "templates",
        "sessions",
        "bake",
        "exec",
        "grade",
        "eval",
        "replay",
        "top",
        "bench",
    ):
        assert f"\n    {name}" in run.out
    assert "exit codes:" in run.out and "130" in run.out


def test_version_and_usage_errors(cli: Cli) -> None:
    assert cli("--version").code == 0
    run = cli("frobnicate")
    assert run.code == 2 and "invalid choice" in run.err
    assert cli("eval").code == 2  # a required argument is missing


def test_bad_url_is_a_usage_error(cli: Cli) -> None:
    run = cli("health", "--url", "ftp://example.com")
    assert run.code == 2 and "is not http://host:port" in run.err


def test_unreachable_node_is_an_infra_error(cli: Cli, tmp_path: Path) -> None:
    run = cli("health", "--json", "--url", f"unix:{tmp_path / 'no-node.sock'}")
    assert run.code == 3
    assert run.json()["error"]["exit_code"] == 3
    assert "is the node up?" in run.err


# -- health, templates, sessions, bake -----------------------------------------


def test_health(cli: Cli, node_url: str) -> None:
    run = cli("health", "--url", node_url)
    assert run.code == 0 and "status" in run.out and "ok" in run.out
    data = cli("health", "--json", "--url", node_url).json()
    assert data["status"] == "ok" and "python3" in data["templates"]


def test_templates(cli: Cli, node_url: str) -> None:
    assert "python3" in cli("templates", "--url", node_url).out
    data = cli("templates", "--json", "--url", node_url).json()
    assert {"id": "python3"} in data["templates"]


def test_bake_then_list_and_reap_its_sessions(cli: Cli, node_url: str, local_client: Any) -> None:
    template = f"cli-{secrets.token_hex(4)}"
    run = cli("bake", template, "--setup", "echo baked > marker.txt", "--json", "--url", node_url)
    assert run.code == 0, run.err
    assert template in run.json()["templates"]
    run = cli("exec", "--template", template, "cat marker.txt", "--url", node_url)
    assert (run.code, run.out) == (0, "baked\n")
    assert cli("bake", template, "--setup", "true", "--url", node_url).code == 2  # exists

    sid = local_client.create_session(template)["session_id"]
    other = local_client.create_session("python3")["session_id"]
    try:
        listed = cli("sessions", "--json", "--template", template, "--url", node_url).json()
        assert [s["session_id"] for s in listed["sessions"]] == [sid]
        assert sid in cli("sessions", "--url", node_url).out
        reaped = cli("sessions", "--reap", "--template", template, "--json", "--url", node_url)
        assert reaped.code == 0
        assert reaped.json()["sessions"][0]["deleted"] is True
        live = {s["session_id"] for s in local_client.list_sessions()}
        assert sid not in live and other in live
    finally:
        local_client.delete_session(other)


def test_failed_bake_exits_1(cli: Cli, node_url: str) -> None:
    run = cli("bake", f"cli-{secrets.token_hex(4)}", "--setup", "exit 3", "--url", node_url)
    assert run.code == 1 and "failed" in run.err


# -- exec --------------------------------------------------------------------


def test_exec_mirrors_output_and_status(cli: Cli, node_url: str, tmp_path: Path) -> None:
    run = cli("exec", "echo hi; exit 7", "--url", node_url)
    assert (run.code, run.out) == (7, "hi\n")
    assert cli("exec", "--code", "print(6 * 7)", "--url", node_url).out == "42\n"
    script = tmp_path / "x.py"
    script.write_text("import sys\nprint('from a file')\nsys.exit(4)\n")
    run = cli("exec", "--file", str(script), "--url", node_url)
    assert (run.code, run.out) == (4, "from a file\n")
    data = cli("exec", "--json", "--code", "print(1)", "--url", node_url).json()
    assert data["exit_code"] == 0 and data["stdout"] == "1\n" and len(data["seed"]) == 64


def test_exec_reads_stdin_and_reports_timeouts(
    cli: Cli, node_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("print('piped')\n"))
    assert cli("exec", "--file", "-", "--url", node_url).out == "piped\n"
    run = cli("exec", "--code", "import time\ntime.sleep(30)", "--timeout", "1", "--url", node_url)
    assert run.code == 124 and "timed out" in run.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "give exactly one of"),
        (("echo hi", "--code", "print(1)"), "give exactly one of"),
        (("--file", "/nonexistent/x.py"), "no such file"),
        (("--timeout", "0", "true"), "--timeout"),
        (("--template", "no-such-template", "true"), "unknown template"),
    ],
)
def test_exec_bad_input(cli: Cli, node_url: str, argv: tuple[str, ...], message: str) -> None:
    run = cli("exec", *argv, "--url", node_url)
    assert run.code == 2 and message in run.err


# -- grade and replay ------------------------------------------------------------


def test_grade_pass_and_fail(cli: Cli, node_url: str, good_file: Path, bad_file: Path) -> None:
    common = ("--task-set", "collimate-basic", "--task", TASK, "--url", node_url)
    run = cli("grade", *common, "--completion", str(good_file))
    assert run.code == 0 and "PASS" in run.out
    run = cli("grade", *common, "--completion", str(bad_file), "--raw")
    assert run.code == 1 and "FAIL" in run.out and "tests not passed" in run.out
    data = cli("grade", *common, "--completion", str(bad_file), "--json").json()
    assert data["ok"] is False and 0 < data["reward"] < 1 and data["task_id"] == TASK


def test_grade_from_stdin(
    cli: Cli, node_url: str, task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(task.reference_solution))
    run = cli(
        "grade",
        "--task-set",
        "collimate-basic",
        "--task",
        TASK,
        "--completion",
        "-",
        "--url",
        node_url,
    )
    assert run.code == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--task-set", "collimate-basik", "--task", TASK), "did you mean 'collimate-basic'"),
        (("--task-set", "collimate-basic", "--task", "basic/count-vowel"), "no task"),
        (("--task-set", "/nonexistent/tasks.jsonl", "--task", TASK), "does not exist"),
    ],
)
def test_grade_bad_input(
    cli: Cli, node_url: str, good_file: Path, argv: tuple[str, ...], message: str
) -> None:
    run = cli("grade", *argv, "--completion", str(good_file), "--url", node_url)
    assert run.code == 2 and message in run.err


def test_grade_missing_completion_file(cli: Cli, node_url: str) -> None:
    run = cli(
        "grade",
        "--task-set",
        "collimate-basic",
        "--task",
        TASK,
        "--completion",
        "/nope.py",
        "--url",
        node_url,
    )
    assert run.code == 2 and "no such file" in run.err


def test_replay_reproduces_and_detects_tampering(
    cli: Cli, node_url: str, tmp_path: Path, good_file: Path, bad_file: Path
) -> None:
    manifest = tmp_path / "manifest.jsonl"
    for completion in (good_file, bad_file):
        cli(
            "grade",
            "--task-set",
            "collimate-basic",
            "--task",
            TASK,
            "--completion",
            str(completion),
            "--manifest",
            str(manifest),
            "--url",
            node_url,
        )
    run = cli("replay", str(manifest), "--url", node_url)
    assert run.code == 0 and "2/2 reproduced" in run.out
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[1]["reward"] = 1.0  # a recorded reward the grader never gave
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = cli("replay", str(tampered), "--json", "--url", node_url).json()
    assert (data["reproduced"], data["mismatched"], data["ok"]) == (1, 1, False)
    assert data["mismatched_under_another_harness"] == 0
    run = cli("replay", str(tampered), "--url", node_url)
    assert run.code == 1 and "another version of the grading harness" not in run.out
    rows[1]["harness"] = "0" * 64  # graded by another version of the harness
    tampered.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = cli("replay", str(tampered), "--url", node_url)
    assert run.code == 1 and "1 of the mismatched rows were graded by another version" in run.out


def test_replay_bad_input(cli: Cli, node_url: str, tmp_path: Path) -> None:
    run = cli("replay", str(tmp_path / "missing.jsonl"), "--url", node_url)
    assert run.code == 2 and "does not exist" in run.err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 1}\nnot json\n')
    run = cli("replay", str(bad), "--url", node_url)
    assert run.code == 2 and "bad.jsonl:2" in run.err


# -- eval --------------------------------------------------------------------


def test_eval_table_json_report_and_resume(cli: Cli, node_url: str, tmp_path: Path) -> None:
    samples = _samples.write(tmp_path / "samples.jsonl", _samples.rows())
    out = tmp_path / "samples.results.jsonl"  # the default output path
    first = cli(
        "eval",
        str(samples),
        "--task-set",
        "collimate-basic",
        "-k",
        "1,2,5",
        "--limit",
        "6",
        "--url",
        node_url,
    )
    assert first.code == 0 and "14 pending" in first.out
    assert len(_samples.result_rows(out)) == 6
    report_file = tmp_path / "report.json"
    run = cli(
        "eval",
        str(samples),
        "--task-set",
        "collimate-basic",
        "-k",
        "1,2,5",
        "--json",
        "--report",
        str(report_file),
        "--url",
        node_url,
    )
    assert run.code == 0
    data = run.json()
    assert data["resumed"] == 6 and data["complete"] is True
    assert {k: round(v, 9) for k, v in data["pass_at_k"].items()} == {
        f"pass@{k}": round(v, 9) for k, v in _samples.EXPECTED.items()
    }
    assert json.loads(report_file.read_text()) == data
    assert sorted(r["index"] for r in _samples.result_rows(out)) == list(range(20))
    table = cli(
        "eval",
        str(samples),
        "--task-set",
        "collimate-basic",
        "-k",
        "1,2,5",
        "--per-task",
        "--url",
        node_url,
    )
    assert (
        "pass@2" in table.out and "0.5750" in table.out and "20 from the output file" in table.out
    )


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        (None, ("--task-set", "collimate-basic"), "does not exist"),
        ("{oops\n", ("--task-set", "collimate-basic"), "samples.jsonl:1: invalid JSON"),
        (
            '{"task_id": "x"}\n',
            ("--task-set", "collimate-basic"),
            "samples.jsonl:1: missing key 'completion'",
        ),
        (
            '{"task_id": "basic/nope", "completion": ""}\n',
            ("--task-set", "collimate-basic"),
            "line 1: no task 'basic/nope'",
        ),
        (
            '{"task_id": "x", "completion": ""}\n',
            ("--task-set", "no-such-set"),
            "unknown task set 'no-such-set'",
        ),
        (
            '{"task_id": "x", "completion": ""}\n',
            ("--task-set", "collimate-basic", "-k", "0"),
            "-k values",
        ),
        (
            '{"task_id": "x", "completion": ""}\n',
            ("--task-set", "collimate-basic", "-k", "one"),
            "-k takes",
        ),
    ],
)
def test_eval_bad_input(
    cli: Cli,
    node_url: str,
    tmp_path: Path,
    content: str | None,
    argv: tuple[str, ...],
    message: str,
) -> None:
    samples = tmp_path / "samples.jsonl"
    if content is not None:
        samples.write_text(content)
    run = cli("eval", str(samples), *argv, "--json", "--url", node_url)
    assert run.code == 2, run.err
    assert message in run.err and message in run.json()["error"]["message"]
    assert not (tmp_path / "samples.results.jsonl").exists()


def test_eval_on_an_unreachable_node_reports_infra_errors(cli: Cli, tmp_path: Path) -> None:
    samples = _samples.write(tmp_path / "samples.jsonl", _samples.rows(((1, 1),)))
    run = cli(
        "eval",
        str(samples),
        "--task-set",
        "collimate-basic",
        "--json",
        "--url",
        f"unix:{tmp_path / 'gone.sock'}",
    )
    assert run.code == 3
    data = run.json()
    assert (data["graded"], data["infra_errors"], data["complete"]) == (0, 2, False)
    assert data["pass_at_k"] == {"pass@1": None}  # nothing measured, nothing counted as wrong
    assert _samples.result_rows(tmp_path / "samples.results.jsonl") == []


def test_eval_refuses_an_output_from_another_run(cli: Cli, node_url: str, tmp_path: Path) -> None:
    samples = _samples.write(tmp_path / "samples.jsonl", _samples.rows(((1, 0),)))
    out = tmp_path / "out.jsonl"
    assert (
        cli(
            "eval",
            str(samples),
            "--task-set",
            "collimate-basic",
            "--output",
            str(out),
            "--url",
            node_url,
        ).code
        == 0
    )
    run = cli(
        "eval",
        str(samples),
        "--task-set",
        "collimate-basic",
        "--output",
        str(out),
        "--timeout",
        "5",
        "--url",
        node_url,
    )
    assert run.code == 2 and "different settings" in run.err


# -- bench -------------------------------------------------------------------


def _bench_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("collimate_rl.bench") is not None


@pytest.mark.skipif(not _bench_importable(), reason="collimate_rl.bench is not in this tree yet")
def test_bench_quick_json(cli: Cli) -> None:
    # the command reaches the suite with its arguments; tests/bench runs the whole quick
    # suite once and checks every section
    run = cli("bench", "--quick", "--json", "--only", "forks")
    assert run.code == 0, run.err
    out = json.loads(run.out)
    assert out["command"] == "collimate bench --quick --json --only forks"
    assert set(out["sections"]) == {"forks", "targets"}


@pytest.mark.skipif(_bench_importable(), reason="collimate_rl.bench exists")
def test_bench_without_the_suite_says_so(cli: Cli) -> None:
    run = cli("bench", "--quick")
    assert run.code == 3 and "collimate_rl.bench" in run.err


def test_health_of_a_draining_node_exits_1(cli: Cli) -> None:
    from collimate_rl.node import LocalNode

    with LocalNode(drain_timeout=20) as node:
        client = node.client()
        url = f"unix:{node.socket_path}"
        assert cli("health", "--url", url).code == 0
        outcome: list[Any] = []

        def long_exec() -> None:
            try:
                outcome.append(client.exec_once("python3", command="sleep 3"))
            except Exception as exc:  # reported below, not lost in the thread
                outcome.append(exc)

        worker = threading.Thread(target=long_exec, daemon=True)
        worker.start()
        deadline = time.monotonic() + 30
        while client.health().running == 0:  # the exec is in flight: the drain must wait for it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert node.pid is not None
        os.kill(node.pid, signal.SIGTERM)
        while (run := cli("health", "--json", "--url", url)).json()["status"] != "draining":
            assert run.code == 0 and time.monotonic() < deadline  # the drain starts on a tick
            time.sleep(0.05)
        assert run.code == 1
        worker.join(timeout=30)
        assert outcome and not isinstance(outcome[0], Exception), outcome
