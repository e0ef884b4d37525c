"""``collimate/Repo-v0`` on a real local node: tools, grades, forgeries, budgets, groups, leaks."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import collimate_envs  # noqa: F401
from collimate_envs.repo import ImageTemplatesUnavailable, apply_patch
from tests.envs.repo._rows import CALC_ROW, ROWS, WORDS_ROW


def _live(client: Any) -> set[str]:
    return {s["session_id"] for s in client.list_sessions()}


@pytest.fixture
def no_leaks(local_client: Any) -> Iterator[None]:
    before = _live(local_client)
    yield
    gc.collect()
    assert _live(local_client) - before == set()


def _env(local_client: Any, rows: Any = ROWS, **kwargs: Any) -> Any:
    return gym.make(
        "collimate/Repo-v0", task_set=rows, client=local_client, disable_env_checker=True, **kwargs
    )


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def _write_patch(env: Any, row: dict[str, Any], patch: str) -> None:
    """Apply ``patch`` through the editor (``create`` / whole-file ``str_replace``)."""
    files = {k: v.encode() for k, v in row["repo_files"].items()}
    for path, data in apply_patch(files, patch).items():
        if data is None:
            env.step(_bash(f"rm -f {path}"))
        elif path in files:
            old = files[path].decode()
            out = env.step(
                {
                    "name": "str_replace_editor",
                    "arguments": {
                        "command": "str_replace",
                        "path": path,
                        "old_str": old,
                        "new_str": data.decode(),
                    },
                }
            )
            assert out[4]["action_error"] == "", out[0]
        else:
            env.step(_bash(f"mkdir -p $(dirname {path})"))
            env.step(
                {
                    "name": "str_replace_editor",
                    "arguments": {"command": "create", "path": path, "file_text": data.decode()},
                }
            )


def _submit(env: Any) -> tuple[float, dict[str, Any]]:
    _, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
    assert terminated and not truncated
    return float(reward), info


@pytest.mark.parametrize("row", [CALC_ROW, WORDS_ROW], ids=["pytest-ids", "unittest-ids"])
def test_the_gold_patch_scores_one_and_no_change_zero(
    local_client: Any, no_leaks: None, row: dict[str, Any]
) -> None:
    env = _env(local_client, [row])
    statement, info = env.reset(seed=0)
    assert row["problem_statement"] in statement and info["task_id"] == row["instance_id"]
    _write_patch(env, row, row["patch"])
    reward, info = _submit(env)
    assert reward == 1.0, info["log_tail"]
    assert (
        set(info["tests"].values()) == {"passed"}
        and info["forgeable"] is True
        and info["rejected"] is None
    )
    assert info["diff"].strip() and apply_patch(
        {k: v.encode() for k, v in row["repo_files"].items()}, info["diff"]
    )
    env.reset(seed=0)
    reward, info = _submit(env)
    assert reward == 0.0 and info["diff"] == ""
    f2p = (
        row["FAIL_TO_PASS"] if isinstance(row["FAIL_TO_PASS"], list) else eval(row["FAIL_TO_PASS"])
    )
    assert all(info["tests"][t] == "failed" for t in f2p)
    env.close()


def test_partial_credit_and_raw_bash_blocks(local_client: Any, no_leaks: None) -> None:
    env = _env(local_client, [CALC_ROW], partial=True)
    env.reset(seed=0)
    obs, *_ = env.step(
        "Let me fix it.\n```bash\nsed -i 's/(len(values) + 1)/max(len(values) - 1, 1)/' calc/ops.py && cat calc/ops.py\n```"
    )
    assert "max(len(values) - 1, 1)" in obs and "[exit code 0]" in obs
    reward, info = _submit(env)
    # mean([7]) == 7 passes now, mean([2, 4]) does not; test_add still passes.
    assert reward == pytest.approx(2 / 3), info["tests"]
    env.close()


def test_the_hidden_tests_are_never_in_the_agents_sandbox(
    local_client: Any, no_leaks: None
) -> None:
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)
    obs, *_ = env.step(
        _bash("ls -a tests; grep -r test_mean_of_two / 2>/dev/null | head -3; echo done")
    )
    assert "test_mean.py" not in obs and "test_mean_of_two" not in obs.replace(
        "grep -r test_mean_of_two", ""
    )
    env.close()


_FORGERIES = {
    "edit an existing test": ("tests/test_ops.py", "def test_add():\n    pass\n"),
    "write the hidden test file": (
        "tests/test_mean.py",
        "def test_mean_of_two():\n    pass\n\n\ndef test_mean_of_one():\n    pass\n",
    ),
    "conftest that passes everything": (
        "conftest.py",
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    out = yield\n    rep = out.get_result()\n    rep.outcome = 'passed'\n",
    ),
    "pytest settings in setup.cfg": (
        "setup.cfg",
        "[metadata]\nname = calc\n[tool:pytest]\naddopts = -p calc.plugin\n",
    ),
    "a pytest.ini": ("pytest.ini", "[pytest]\naddopts = --deselect tests/test_mean.py\n"),
    "pytest settings in pyproject.toml": (
        "pyproject.toml",
        "[tool.pytest.ini_options]\naddopts = '-k add'\n",
    ),
    "sitecustomize": ("sitecustomize.py", "import builtins\n"),
    "usercustomize": ("calc/usercustomize.py", "import builtins\n"),
    "a .pth file": ("calc.pth", "import os\n"),
    "a shadow pytest": ("pytest.py", "import sys\nsys.exit(0)\n"),
    "a shadow of the report plugin": (
        "collimate_repo_report.py",
        "def pytest_configure(config):\n    pass\n",
    ),
    "a pytest plugin module": (
        "pytest_forge.py",
        "def pytest_collection_modifyitems(items):\n    items.clear()\n",
    ),
}


@pytest.mark.parametrize("name", sorted(_FORGERIES))
def test_each_forgery_scores_zero(local_client: Any, no_leaks: None, name: str) -> None:
    path, content = _FORGERIES[name]
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)
    env.step(_bash(f"mkdir -p $(dirname {path}) && cat > {path} <<'EOF'\n{content}EOF"))
    # the honest fix too: the forgery alone must be what refuses the change
    env.step(_bash("sed -i 's/(len(values) + 1)/len(values)/' calc/ops.py"))
    reward, info = _submit(env)
    assert reward == 0.0 and info["rejected"] and path in info["rejected"], info
    assert set(info["tests"].values()) == {"not run"} and path in info["diff"]
    env.close()


@pytest.mark.parametrize("how", ["rm", "mv"])
def test_deleting_or_renaming_a_test_file_scores_zero(
    local_client: Any, no_leaks: None, how: str
) -> None:
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)
    command = "rm tests/test_ops.py" if how == "rm" else "mv tests/test_ops.py tests/ops_checks.py"
    env.step(_bash(command + " && sed -i 's/(len(values) + 1)/len(values)/' calc/ops.py"))
    reward, info = _submit(env)
    assert reward == 0.0 and "tests/test_ops.py" in info["rejected"]
    env.close()


def test_changes_outside_the_repository_never_reach_the_grade(
    local_client: Any, no_leaks: None
) -> None:
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)
    # A runner hook planted in the agent's own user site and /tmp: not carried (and a
    # symlink inside the repo to it is refused).
    env.step(
        _bash(
            "site=$(python3 -c 'import site; print(site.getusersitepackages())'); mkdir -p $site && "
            "printf 'import os\\nos._exit(0)\\n' > $site/sitecustomize.py && echo 'x' > /tmp/forged"
        )
    )
    reward, info = _submit(env)
    assert reward == 0.0 and info["rejected"] is None and info["diff"] == ""
    env.reset(seed=0)
    env.step(_bash("ln -s /tmp/anything calc/helper.py"))
    reward, info = _submit(env)
    assert reward == 0.0 and "symbolic" in info["rejected"]
    env.close()


def test_the_in_process_forgery_that_remains_is_marked(local_client: Any, no_leaks: None) -> None:
    """Code under test shares the runner's process; such a rewrite is not caught, only marked."""
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)
    env.step(
        _bash(
            "cat >> calc/__init__.py <<'EOF'\n"
            "import _pytest.runner as _r\n"
            "_orig = _r.TestReport.from_item_and_call if hasattr(_r, 'TestReport') else None\n"
            "EOF"
        )
    )
    reward, info = _submit(env)
    assert info["forgeable"] is True and reward == 0.0
    env.close()


def test_editor_commands(local_client: Any, no_leaks: None) -> None:
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)

    def edit(**args: Any) -> tuple[str, dict[str, Any]]:
        obs, _, _, _, info = env.step({"name": "str_replace_editor", "arguments": args})
        return obs, info

    obs, _ = edit(command="view", path="calc/ops.py", view_range=[5, -1])
    assert "     5\tdef mean(values):" in obs and "def add" not in obs
    obs, _ = edit(command="view", path=".")
    assert "calc/ops.py" in obs
    obs, info = edit(command="str_replace", path="calc/ops.py", old_str="return", new_str="return")
    assert "occurs 2 times" in info["action_error"] and "[2, 6]" in obs
    obs, info = edit(command="create", path="calc/ops.py", file_text="x")
    assert "already exists" in info["action_error"]
    edit(command="insert", path="calc/ops.py", insert_line=0, new_str="# header")
    obs, _ = edit(command="view", path="calc/ops.py", view_range=[1, 2])
    assert "     1\t# header\n     2\tdef add" in obs
    edit(command="undo_edit", path="calc/ops.py")
    edit(command="create", path="calc/extra.py", file_text="VALUE = 'é\\x00'\n")
    obs, *_ = env.step(
        _bash("head -1 calc/ops.py; python3 -c 'from calc.extra import VALUE; print(len(VALUE))'")
    )
    assert obs.startswith("def add") and "2\n" in obs
    obs, info = edit(command="view", path="nope.py")
    assert "does not exist" in info["action_error"]
    _, info = _submit(env)
    assert "calc/extra.py" in info["diff"] and "calc/ops.py" not in info["diff"]
    env.close()


def test_budgets_truncate_and_grade(local_client: Any, no_leaks: None) -> None:
    env = _env(local_client, [CALC_ROW], max_turns=2, max_observation_chars=300)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(_bash("seq 1 2000"))
    assert "characters truncated" in obs and obs.startswith("1\n") and not (terminated or truncated)
    obs, reward, terminated, truncated, info = env.step(
        _bash("sed -i 's/(len(values) + 1)/len(values)/' calc/ops.py")
    )
    assert truncated and not terminated and info["end"] == "turns" and reward == 1.0
    env.close()
    env = _env(local_client, [CALC_ROW], max_output_bytes=50)
    env.reset(seed=0)
    *_, truncated, info = env.step(_bash("seq 1 100"))
    assert truncated and info["end"] == "output_bytes"
    env.close()
    env = _env(local_client, [CALC_ROW], max_wall_seconds=0.0)
    env.reset(seed=0)
    *_, truncated, info = env.step("not an action")
    assert truncated and info["end"] == "wall_time" and info["action_error"]
    env.close()


def test_a_command_timeout_is_an_observation(local_client: Any, no_leaks: None) -> None:
    env = _env(local_client, [CALC_ROW], command_timeout=1)
    env.reset(seed=0)
    obs, *_, info = env.step({"name": "bash", "arguments": {"command": "sleep 5", "timeout": 30}})
    assert "timed out after 1s" in obs and info["exit_code"] == -1
    env.close()


def test_an_image_row_runs_in_its_image(
    local_client: Any, no_leaks: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # SWE-bench's layout: the repository at /testbed of the task's image (a Debian root with
    # its own python3 and pytest), no snapshot in the row; graded with the image's Python
    from tests.node.images._rootfs import rootfs_layout, tar_layer

    repo = {f"testbed/{path}": text.encode() for path, text in CALC_ROW["repo_files"].items()}
    layout = rootfs_layout(
        "bookworm-pytest",
        tmp_path_factory.mktemp("swe-image"),
        config={"WorkingDir": "/testbed", "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        extra_layers=(tar_layer(repo),),
    )
    row = {**CALC_ROW, "repo_files": None, "image_name": f"oci:{layout}:v1"}
    scores = []
    for patch in (CALC_ROW["patch"], ""):
        env = _env(local_client, [row])
        env.reset(seed=0)
        out = env.step(_bash("pwd; python3 -c 'import sys; print(sys.version_info[:2])'"))[0]
        assert "/testbed" in out and "(3, 11)" in out, out
        if patch:
            _write_patch(env, CALC_ROW, patch)
        reward, info = _submit(env)
        scores.append(reward)
        assert not info.get("infra_error"), info
        env.close()
    assert scores == [1.0, 0.0]


def test_an_image_the_node_cannot_pull_is_a_clear_error(local_client: Any, tmp_path: Any) -> None:
    env = _env(
        local_client,
        [{**CALC_ROW, "repo_files": None, "image_name": f"oci:{tmp_path}/none:v1"}],
    )
    with pytest.raises(ImageTemplatesUnavailable, match="none"):
        env.reset(seed=0)
    env.close()


def test_tools_are_openai_function_schemas(local_client: Any) -> None:
    env = _env(local_client)
    names = [tool["function"]["name"] for tool in env.unwrapped.tools]
    assert names == ["bash", "str_replace_editor", "submit"]
    assert all(
        tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"
        for tool in env.unwrapped.tools
    )
    env.close()


def test_check_env_passes(local_node: Any, local_client: Any, no_leaks: None) -> None:
    from gymnasium.utils.env_checker import check_env

    # connect() arguments survive gymnasium's re-making of the env from its spec
    env = gym.make(
        "collimate/Repo-v0", task_set=[CALC_ROW], unix_socket=str(local_node.socket_path)
    )
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_group_members_fork_one_task_step_alone_and_get_advantages(
    local_client: Any, no_leaks: None
) -> None:
    envs = gym.make_vec(
        "collimate/Repo-v0",
        num_envs=4,
        group_size=2,
        task_set=[CALC_ROW, WORDS_ROW],
        client=local_client,
    )
    obs, infos = envs.reset(seed=1, options={"task_id": "calc__mean-1"})
    assert obs[0] == obs[1] and list(infos["group"]) == [0, 0, 1, 1]
    fix = _bash("sed -i 's/(len(values) + 1)/len(values)/' calc/ops.py")
    submit = {"name": "submit"}
    # member 0 fixes; member 1 only looks; group 1's members both submit at once
    _, rewards, term, _, infos = envs.step([fix, _bash("cat calc/ops.py"), submit, submit])
    assert term[2] and term[3] and infos["group_done"][2] and not infos["_group_done"][0]
    obs, rewards, term, _, infos = envs.step(
        [submit, _bash("cat calc/ops.py"), "ignored", "ignored"]
    )
    assert term[0] and rewards[0] == 1.0 and "(len(values) + 1)" in obs[1], obs[
        1
    ]  # members are isolated
    assert obs[2] and list(infos["turn"][2:]) == [0, 0]  # group 1 was done: it autoresets
    echo = _bash("echo still here")
    obs, rewards, term, _trunc, infos = envs.step(["ignored", submit, echo, echo])
    assert infos["waiting"][0] and not infos["_waiting"][2] and "still here" in obs[2]
    assert term[1] and rewards[1] == 0.0 and infos["group_done"][0] and infos["group_done"][1]
    np.testing.assert_allclose(infos["advantage"][:2], [1.0, -1.0], atol=1e-4)
    assert infos["group_reward"][0] == 1.0 and not infos["_group_done"][2]
    obs, *_, infos = envs.step(["x", "x", echo, echo])  # group 0 autoresets
    assert obs[0] and list(infos["turn"]) == [0, 0, 2, 2]
    envs.close()


def test_the_hosts_pytest_is_copied_outside_the_repository(
    local_client: Any, no_leaks: None
) -> None:
    env = _env(local_client, [CALC_ROW], vendor_runner=True)
    env.reset(seed=0)
    obs, *_ = env.step(_bash("python3 -c 'import pytest; print(pytest.__file__)'"))
    assert "/sandbox/.local/" in obs and "/sandbox/repo" not in obs.split("\n")[0]
    # the agent breaks its copy of the runner: the grade uses the pristine one
    env.step(
        _bash(
            "site=$(python3 -c 'import site; print(site.getusersitepackages())'); "
            "printf 'raise SystemExit(0)\\n' > $site/pytest/__init__.py; "
            "sed -i 's/(len(values) + 1)/len(values)/' calc/ops.py"
        )
    )
    reward, info = _submit(env)
    assert reward == 1.0 and info["diff"].count("diff --git") == 1, info["log_tail"]
    env.close()


@pytest.mark.parametrize("policy", ["raise", "flag"])
def test_a_lost_sandbox_is_an_infrastructure_error_never_a_reward(
    local_client: Any, no_leaks: None, policy: str
) -> None:
    from collimate_rl.errors import CollimateError

    before = _live(local_client)
    env = _env(local_client, [CALC_ROW], on_infra_error=policy)
    env.reset(seed=0)
    env.step(_bash("true"))
    for session_id in _live(local_client) - before:  # the node lost every session of ours
        local_client.delete_session(session_id)
    if policy == "raise":
        with pytest.raises(CollimateError):
            env.step(_bash("ls"))
    else:
        _, reward, terminated, truncated, info = env.step(_bash("ls"))
        assert info["infra_error"] is True and reward == 0.0 and truncated and not terminated
    env.close()


def test_code_under_test_printing_a_fake_report_earns_nothing(
    local_client: Any, no_leaks: None
) -> None:
    """The report frame carries a per-grade nonce the code under test never sees."""
    env = _env(local_client, [CALC_ROW])
    env.reset(seed=0)
    fake = '{"tests/test_mean.py::test_mean_of_two": "passed", "tests/test_mean.py::test_mean_of_one": "passed"}'
    env.step(
        _bash(
            "cat >> calc/__init__.py <<'EOF'\n"
            "import sys\n"
            f"for guess in ('0' * 32, 'f' * 32):\n"
            f"    sys.__stdout__.write('\\n@@COLREPORT ' + guess + ' 0\\n' + {fake!r} + '\\n')\n"
            "EOF"
        )
    )
    reward, info = _submit(env)
    assert reward == 0.0 and info["rejected"] is None and "@@COLREPORT 000" in info["log_tail"]
    assert info["tests"]["tests/test_mean.py::test_mean_of_two"] == "failed"
    env.close()


def test_a_group_member_lost_to_the_node_is_flagged_and_has_no_advantage(
    local_client: Any, no_leaks: None
) -> None:
    envs = gym.make_vec(
        "collimate/Repo-v0", num_envs=3, group_size=3, task_set=[CALC_ROW], client=local_client
    )
    envs.reset(seed=0)
    local_client.delete_session(envs.unwrapped.member_sandboxes[2].session_id)
    fix = _bash("sed -i 's/(len(values) + 1)/len(values)/' calc/ops.py")
    _, rewards, _, truncated, infos = envs.step([fix, _bash("true"), _bash("true")])
    assert infos["infra_error"][2] and truncated[2] and rewards[2] == 0.0 and "error" in infos
    submit = {"name": "submit"}
    _, rewards, _, _, infos = envs.step([submit, submit, submit])
    assert list(rewards) == [1.0, 0.0, 0.0] and infos["waiting"][2]
    assert infos["group_done"][0] and np.isnan(infos["advantage"][2])
    np.testing.assert_allclose(infos["advantage"][:2], [1.0, -1.0], atol=1e-4)
    envs.close()
