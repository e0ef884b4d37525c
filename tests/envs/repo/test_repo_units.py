"""Repo-v0's host-side pieces: patches, test ids, the change policy, rows, actions (no sandbox)."""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import tarfile
from pathlib import Path

import pytest

from collimate_envs.repo import (
    ActionError,
    PatchError,
    RepoTask,
    RowError,
    apply_patch,
    canonical,
    load_repo_tasks,
    make_patch,
    outcomes_from_log,
    parse_action,
    refusal,
)
from collimate_envs.repo._episode import truncate_output
from collimate_envs.repo._runner import parse_run
from collimate_envs.repo._settings import RepoSettings
from collimate_envs.repo.env import RepoEnv
from collimate_envs.repo.vector import RepoGroupVectorEnv
from tests.envs.repo._rows import CALC_FILES, CALC_GOLD, CALC_ROW, CALC_TEST_PATCH


def _b(files: dict[str, str]) -> dict[str, bytes]:
    return {k: v.encode() for k, v in files.items()}


def test_gold_and_test_patches_apply_and_round_trip() -> None:
    files = _b(CALC_FILES)
    fixed = apply_patch(files, CALC_GOLD)
    assert b"/ len(values)\n" in fixed["calc/ops.py"]
    assert apply_patch(files, make_patch(files, {**files, **fixed})) == fixed
    tests = apply_patch(files, CALC_TEST_PATCH)
    assert (
        list(tests) == ["tests/test_mean.py"]
        and b"def test_mean_of_one" in tests["tests/test_mean.py"]
    )


def test_patches_handle_deletes_renames_and_missing_newlines() -> None:
    old = {"a.txt": b"one\ntwo", "b.txt": b"gone\n"}
    new = {"a.txt": b"one\nthree", "b.txt": None, "c.txt": b"new\n"}
    assert apply_patch(old, make_patch(old, new)) == new
    rename = (
        "diff --git a/b.txt b/d.txt\nsimilarity index 100%\nrename from b.txt\nrename to d.txt\n"
    )
    assert apply_patch(old, rename) == {"b.txt": None, "d.txt": b"gone\n"}


def test_a_patch_that_does_not_fit_is_an_error() -> None:
    with pytest.raises(PatchError, match="does not apply"):
        apply_patch({"calc/ops.py": b"something else\n"}, CALC_GOLD)
    with pytest.raises(PatchError, match="does not exist"):
        apply_patch({}, CALC_GOLD)


def test_test_ids_in_every_form_meet() -> None:
    assert (
        canonical("test_x (pkg.mod.TestA)")
        == canonical("pkg.mod.TestA.test_x")
        == "pkg/mod.py::TestA::test_x"
    )
    log = "PASSED a.py::t1\nFAILED a.py::t2 - boom\nERROR a.py::t3\ntest_y (m.TestB) ... FAIL\n"
    assert outcomes_from_log(log) == {
        "a.py::t1": "passed",
        "a.py::t2": "failed",
        "a.py::t3": "error",
        "m.py::TestB::test_y": "failed",
    }


def test_a_report_frame_needs_its_nonce() -> None:
    fake = 'junk\n@@COLREPORT other 0\n{"t.py::a": "passed"}'
    assert parse_run(fake, "n1")[0] is None
    real = fake + '\n@@COLREPORT n1 1\n{"t.py::a": "failed"}'
    assert parse_run(real, "n1")[0] == {"t.py::a": "failed"}


@pytest.mark.parametrize(
    ("path", "before", "after", "why"),
    [
        ("tests/test_ops.py", b"x", b"y", "test files"),
        ("tests/test_ops.py", b"x", None, "test files"),
        ("tests/test_mean.py", None, b"y", "hidden tests"),
        ("conftest.py", None, b"", "conftest"),
        ("pkg/conftest.py", b"a", b"b", "conftest"),
        ("pytest.ini", None, b"[pytest]\n", "pytest's settings"),
        (
            "setup.cfg",
            b"[metadata]\n",
            b"[metadata]\n[tool:pytest]\naddopts = -p x\n",
            "pytest settings",
        ),
        ("tox.ini", None, b"[pytest]\naddopts=-x\n", "pytest settings"),
        ("pyproject.toml", b"", b"[tool.pytest.ini_options]\naddopts = '-x'\n", "pytest settings"),
        ("sitecustomize.py", None, b"", "start-up hooks"),
        ("lib/usercustomize.py", None, b"", "start-up hooks"),
        ("evil.pth", None, b"import os\n", "start-up hooks"),
        ("pytest.py", None, b"", "shadow"),
        ("_pytest/runner.py", None, b"", "shadow"),
        ("pytest_evil.py", None, b"", "shadow"),
        ("collimate_repo_report.py", None, b"", "shadow"),
        ("../outside.py", None, b"", "inside the repository"),
        (".git/config", b"a", b"b", "git"),
    ],
)
def test_the_policy_refuses_what_decides_how_tests_run(
    path: str, before: bytes | None, after: bytes | None, why: str
) -> None:
    reason = refusal(
        {path: after}, {path: before} if before is not None else {}, hidden={"tests/test_mean.py"}
    )
    assert reason is not None and why in reason


def test_the_policy_allows_source_changes_and_other_settings() -> None:
    ok = {
        "calc/ops.py": b"x",
        "setup.cfg": b"[metadata]\nname = calc2\n",
        "tests/test_new_by_agent.py": b"def test_x(): pass\n",
        "pyproject.toml": b"[project]\nname = 'x'\n",
    }
    assert (
        refusal(ok, {"calc/ops.py": b"y", "setup.cfg": b"[metadata]\nname = calc\n"}, hidden=())
        is None
    )
    assert "symbolic" in (refusal({"calc/link": b""}, {}, hidden=(), links={"calc/link"}) or "")


def test_rows_in_three_formats() -> None:
    task = RepoTask.from_row(CALC_ROW)
    assert (
        task.fail_to_pass[0] == "tests/test_mean.py::test_mean_of_two"
        and task.gold_patch == CALC_GOLD
    )
    assert task.hidden_paths == ("tests/test_mean.py",) and task.image is None
    r2e = RepoTask.from_row(
        {
            "repo_name": "orange",
            "docker_image": "namanjain12/orange_final:abc",
            "commit_hash": "abc",
            "problem_statement": "x",
            "expected_output_json": json.dumps({"t.py::a": "PASSED", "t.py::b": "FAILED"}),
        }
    )
    assert (r2e.row_format, r2e.image, r2e.workdir, r2e.tests) == (
        "r2e-gym",
        "namanjain12/orange_final:abc",
        "/testbed",
        ("t.py::a", "t.py::b"),
    )
    assert r2e.must_pass("t.py::a") and not r2e.must_pass("t.py::b")
    smith = RepoTask.from_row(
        {
            "instance_id": "o__r.1",
            "image_name": "swesmith/o:1",
            "problem_statement": "x",
            "patch": "bug",
            "FAIL_TO_PASS": ["t.py::a"],
        }
    )
    assert (
        smith.row_format == "swe-smith"
        and smith.gold_patch == ""
        and smith.setup_cmd == "git checkout o__r.1"
    )
    assert RepoTask.from_row({**CALC_ROW, "repo_files": None}, image="img:1").image == "img:1"
    assert (
        RepoTask.from_row(
            {**CALC_ROW, "repo_files": None}, image_for=lambda row: f"x/{row['instance_id']}"
        ).image
        == "x/calc__mean-1"
    )
    assert RepoTask.from_row(CALC_ROW, workdir="/testbed").workdir == "/testbed"


def test_bad_rows_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RowError, match="no environment"):
        RepoTask.from_row({"instance_id": "x", "problem_statement": "y"})
    with pytest.raises(RowError, match="JSON list"):
        RepoTask.from_row({**CALC_ROW, "FAIL_TO_PASS": "not json"})
    with pytest.raises(RowError, match="no instance_id"):
        RepoTask.from_row({"problem_statement": "y", "repo_files": {}})
    archive = tmp_path / "repo.tar"
    with tarfile.open(archive, "w") as tar:
        data = b"x = 1\n"
        info = tarfile.TarInfo("./pkg/a.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    task = RepoTask.from_row(
        {"instance_id": "a", "problem_statement": "p", "repo_archive": str(archive)}
    )
    assert task.files == {"pkg/a.py": b"x = 1\n"}
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps(CALC_ROW) + "\n")
    assert [t.task_id for t in load_repo_tasks(str(jsonl)).tasks] == ["calc__mean-1"]


def test_actions_in_both_protocols_and_their_errors() -> None:
    call = parse_action(
        {
            "type": "function",
            "function": {
                "name": "str_replace_editor",
                "arguments": {"command": "view", "path": "a"},
            },
        }
    )
    assert call.arguments["command"] == "view"
    assert (
        parse_action('{"name": "bash", "arguments": {"command": "ls", "timeout": 5}}').arguments[
            "timeout"
        ]
        == 5
    )
    for bad, why in [
        ("two\n```bash\nls\n```\n```bash\npwd\n```", "found 2 bash blocks"),
        ({"name": "rm_rf"}, "unknown tool"),
        ({"name": "bash", "arguments": "{oops"}, "not valid JSON"),
        ({"name": "bash", "arguments": {"command": ""}}, "non-empty"),
        ({"name": "bash", "arguments": {"command": "ls", "timeout": -1}}, "positive"),
        ({"name": "str_replace_editor", "arguments": {"command": "delete", "path": "a"}}, "one of"),
        (42, "not int"),
    ]:
        with pytest.raises(ActionError, match=why):
            parse_action(bad)


def test_long_output_keeps_head_and_tail_around_a_marker() -> None:
    out = truncate_output("h" * 500 + "t" * 500, 300)
    assert (
        out.startswith("h" * 120)
        and out.endswith("t" * 180)
        and "[... 700 characters truncated ...]" in out
    )


def test_expected_statuses_and_partial_scores() -> None:
    from collimate_envs.repo._grader import _score

    r2e = RepoTask(
        "r", "x", files={"a.py": b""}, expected={"t.py::a": "PASSED", "t.py::b": "FAILED"}
    )
    graded = _score(
        r2e.tests, r2e, {"t.py::a": "passed", "t.py::b": "failed"}, "", 1, diff="", partial=False
    )
    assert graded.reward == 1.0 and graded.passed == 2
    graded = _score(
        r2e.tests, r2e, {"t.py::a": "passed", "t.py::b": "passed"}, "", 0, diff="", partial=True
    )
    assert graded.reward == 0.5
    swe = RepoTask.from_row(CALC_ROW)
    # a module that did not import: its tests are errors, the others missing
    graded = _score(swe.tests, swe, {"tests/test_mean.py": "error"}, "", 2, diff="", partial=False)
    assert graded.reward == 0.0 and graded.tests["tests/test_mean.py::test_mean_of_two"] == "error"
    assert graded.tests["tests/test_ops.py::test_add"] == "missing"


@pytest.mark.parametrize("env_class", [RepoEnv, RepoGroupVectorEnv])
def test_both_envs_take_every_setting_with_its_default(env_class: type) -> None:
    # The envs keep explicit keyword arguments (gymnasium.make passes them through) and
    # hand them to RepoSettings: a setting missing from a signature, or a default that
    # differs from the settings', would make the two envs drift apart.
    parameters = inspect.signature(env_class).parameters
    for setting in dataclasses.fields(RepoSettings):
        assert parameters[setting.name].default == setting.default, setting.name
