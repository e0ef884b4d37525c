"""A template's binds (a toolchain, a warm-up cache) reach its sessions wherever they live.

A session mounts its own ``/tmp`` (and ``/dev/shm``, ``/sandbox``, ``/proc``): a host
folder under one of them, bound at its own path, would be hidden in every session. Such a
folder is shown at ``/opt/collimate/host/<its path>`` instead, and the template's ``PATH``
entries and environment follow it. The node's own Python cannot move: a clear error instead.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path

import pytest

from collimate_rl.node.runtime import LocalRuntime, TemplateSpec

from .conftest import run

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]


@pytest.mark.parametrize("interpreter", ["python3", "/bin/sh"])
async def test_a_toolchain_under_tmp_is_seen_in_sessions(
    rt: LocalRuntime, interpreter: str
) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        tool = Path(tmp) / "tool"
        (tool / "bin").mkdir(parents=True)
        (tool / "data").write_text("from the toolchain\n")
        hello = tool / "bin" / "collimate-hello"
        hello.write_text('#!/bin/sh\necho "hello from $0"\n')
        hello.chmod(0o755)
        for path in (Path(tmp), tool, tool / "bin"):
            path.chmod(0o755)
        (tool / "data").chmod(0o644)
        (Path(tmp) / "beside-the-tool").write_text("not the template's\n")
        (Path(tmp) / "beside-the-tool").chmod(0o644)
        name = "binds-test"  # (one template, replaced by each test: none piles up)
        await rt.add_template(
            TemplateSpec(
                name,
                interpreter=interpreter,
                binds=(tool,),
                path=(str(tool / "bin"),),
                env=(("TOOL_HOME", str(tool)), ("TOOL_DIRS", f"{tool}:/usr/share")),
            )
        )
        sess = await rt.create_session(name, f"s-{secrets.token_hex(3)}")
        try:
            out = await run(
                sess,
                command='collimate-hello; cat "$TOOL_HOME/data"; echo "$TOOL_DIRS"; ls /tmp; '
                # what else of the host's /tmp shows, and whether the session can write there
                f"ls -A /opt/collimate/host/tmp {tmp} /opt/collimate/host{tmp}; "
                'touch "$TOOL_HOME/left-behind" 2>/dev/null && echo WROTE; true',
            )
        finally:
            await sess.close()
        assert out.exit_code == 0, out.output
        seen = f"/opt/collimate/host{tool}"
        assert out.output.decode().splitlines() == [
            f"hello from {seen}/bin/collimate-hello",
            "from the toolchain",
            f"{seen}:/usr/share",
            # the session's own /tmp is empty, and the host's path is not there either
            f"ls: cannot access '{tmp}': No such file or directory",
            "/opt/collimate/host/tmp:",
            Path(tmp).name,  # only the way down to the tool: no other file of the host's /tmp
            "",
            f"/opt/collimate/host{tmp}:",
            "tool",  # not the file beside it
        ], out.output
        assert not (tool / "left-behind").exists()  # read-only


async def test_a_toolchain_elsewhere_keeps_its_own_path(rt: LocalRuntime) -> None:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        tool = Path(tmp) / "tool"
        tool.mkdir()
        (tool / "data").write_text("at home\n")
        for path in (Path(tmp), tool):
            path.chmod(0o755)
        (tool / "data").chmod(0o644)
        name = "binds-test"  # (one template, replaced by each test: none piles up)
        await rt.add_template(TemplateSpec(name, binds=(tool,), env=(("TOOL_HOME", str(tool)),)))
        sess = await rt.create_session(name, f"s-{secrets.token_hex(3)}")
        try:
            out = await run(sess, command='echo "$TOOL_HOME"; cat "$TOOL_HOME/data"')
        finally:
            await sess.close()
        assert out.output.decode().splitlines() == [str(tool), "at home"], out.output


def test_a_python_installed_where_sessions_mount_their_own_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node's own interpreter cannot be moved as a toolchain is (its library may be
    found by an absolute path): a clear error when the template starts, not sessions that
    cannot import the standard library."""
    from collimate_rl.node.runtime import _reach, host_paths

    prefix = Path("/tmp/py")
    monkeypatch.setattr(host_paths, "python_paths", lambda: (prefix / "bin/python3", prefix))
    with pytest.raises(_reach.UnreachablePath, match=r"node's Python \(/tmp/py\) is installed"):
        host_paths.python_args()
    monkeypatch.setattr(
        host_paths, "python_paths", lambda: (Path("/opt/py/bin/python3"), Path("/opt/py"))
    )
    assert host_paths.python_args()[:3] == ["--ro-bind", "/opt/py", "/opt/py"]
