"""Language templates: a missing toolchain is a clear error, never a crash; networked twins."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from faults._proc import processes_with

from collimate_rl.cli import main as cli
from collimate_rl.errors import CollimateNotFoundError, CollimateUsageError
from collimate_rl.grading import IOReward, grade

from ._programs import correct, fenced, spec

pytestmark = pytest.mark.bwrap


def test_a_node_without_a_toolchain_names_the_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node whose toolchain PATH has only gcc and bash offers c and bash, says why not the rest."""
    from collimate_rl.node import LocalNode

    for tool in ("gcc", "bash"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"no {tool} here")
        os.symlink(found, tmp_path / tool)
    monkeypatch.setenv("COLLIMATE_TOOLCHAIN_PATH", str(tmp_path))
    with LocalNode() as node:
        client = node.client()
        ids = client.templates()
        assert {"python3", "c", "bash"} <= set(ids) and "cpp" not in ids
        assert ids.unavailable["cpp"] == f"`g++` not found on the PATH ({tmp_path})"
        assert ids.unavailable["rust"].startswith("`rustc` not found")
        with pytest.raises(
            CollimateNotFoundError, match=r"'cpp' is not available on this node: `g\+\+` not found"
        ):
            grade(client, "cpp", fenced(correct("cpp"), "cpp"), spec())
        assert client.health().status == "ok"
        assert grade(client, "c", fenced(correct("c"), "c"), spec()).reward == 1.0
        # `collimate templates` says the same
        url = f"unix:{node.socket_path}"
        assert cli(["templates", "--json", "--url", url]) == 0
        rows = json.loads(capsys.readouterr().out)["templates"]
        assert {"id": "c"} in rows and {"id": "cpp", "unavailable": ids.unavailable["cpp"]} in rows
        assert cli(["templates", "--url", url]) == 0
        assert "`javac` not found" in capsys.readouterr().out


def test_a_sandbox_without_the_compiler_raises_a_usage_error(local_client: Any) -> None:
    """The Python template has no Rust: grading Rust there names the missing tool."""
    with pytest.raises(CollimateUsageError, match="rustc"):
        grade(local_client, "python3", fenced(correct("rust"), "rust"), spec(language="rust"))
    ok = grade(
        local_client,
        "python3",
        fenced(correct("python"), "python"),
        IOReward([{"input": "1 2\n", "output": "3\n"}]),
    )
    assert ok.reward == 1.0


def test_language_templates_have_networked_twins(local_client: Any, offered: Any) -> None:
    """Every language template has its ``-net`` twin, which starts the template on first use."""
    if "c" not in offered:
        pytest.skip(f"no c template here: {offered.unavailable.get('c')}")
    assert {"c-net", "cpp-net", "python3-net"} & set(offered) == {
        t for t in ("c-net", "cpp-net", "python3-net") if t.removesuffix("-net") in offered
    }
    result = local_client.exec_once(
        "c-net", command="gcc --version | head -n 1", egress={"mode": "none"}, timeout_seconds=60
    )
    assert result.exit_code == 0 and "gcc" in result.stdout


def test_closing_the_runtime_stops_a_warm_up_midway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A C++ precompiled header still building when the runtime closes: killed, no leftovers,
    not even the compiler's own temporary files (its ``TMPDIR`` is a folder of the build)."""
    import asyncio
    import subprocess
    import time

    from collimate_rl.node.runtime import create_runtime

    if shutil.which("g++") is None:
        pytest.skip("no g++ here")
    cache = tmp_path / "cache"
    monkeypatch.setenv("COLLIMATE_CACHE_DIR", str(cache))

    async def run() -> None:
        rt = create_runtime("none", state_dir=tmp_path / "state", languages="cpp")
        with pytest.warns(RuntimeWarning):
            await rt.start()
        try:
            session = await rt.create_session("cpp", "s1")
            await session.close()
            assert rt.languages._tasks, "the warm-up is building"
            deadline = time.monotonic() + 30
            while not (compilers := processes_with(str(cache))):
                assert time.monotonic() < deadline, "the warm-up never started its compiler"
                await asyncio.sleep(0.02)
            for pid in compilers:
                env = _environ(pid)
                if env is not None:  # (None: it exited meanwhile)
                    assert env.get("TMPDIR", "").startswith(str(cache) + os.sep), (pid, env)
        finally:
            await rt.close()

    asyncio.run(run())
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(cache) not in ps, "no compiler left running"
    leftovers = [p.name for p in cache.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == [] and not list(cache.rglob("*.gch"))
    assert not list(cache.rglob(".scratch-*"))  # the compiler's temporary files went with it


def test_warm_ups_in_a_cache_under_tmp_reach_the_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder the sessions' own ``/tmp`` would hide (``COLLIMATE_CACHE_DIR`` or
    ``HOME`` under ``/tmp``) is shown at another path; the template's environment and the
    javac wrapper follow it (before, each warm-up silently did nothing there)."""
    import time

    from collimate_rl.node import LocalNode

    for tool in ("g++", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} here")
    cache = Path(tempfile.mkdtemp(dir="/tmp", prefix="collimate-cache-"))  # (tmp_path may not be)
    monkeypatch.setenv("COLLIMATE_CACHE_DIR", str(cache))
    probe = {
        "cpp": 'ls "$CPLUS_INCLUDE_PATH/bits"',
        "java": 'j=$(command -v javac); test -r "${j%/*}/../javac.jsa" && echo javac.jsa; '
        "javac -J-Xshare:on -version 2>&1 | cut -d' ' -f1",
    }
    try:
        with LocalNode() as node:
            client = node.client()
            for template in probe:
                client.exec_once(template, command="true", timeout_seconds=60)  # starts it
            deadline = time.monotonic() + 240
            while not (list(cache.rglob("stdc++.h.gch")) and list(cache.rglob("javac.jsa"))):
                assert time.monotonic() < deadline, "the warm-ups were not built in time"
                time.sleep(0.5)
            for template, command in probe.items():
                result = client.exec_once(template, command=command, timeout_seconds=60)
                assert result.exit_code == 0, result.stderr
                shown = {"cpp": ["stdc++.h.gch"], "java": ["javac.jsa", "javac"]}[template]
                assert result.stdout.split() == shown, (template, result.stdout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _environ(pid: int) -> dict[str, str] | None:
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (item.decode(errors="replace").partition("=") for item in data.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def test_the_go_warm_up_is_the_standard_library_compiled_and_world_readable(
    tmp_path: Path,
) -> None:
    """Built once (before the template starts), then offered as ``GOCACHE``."""
    import asyncio

    from collimate_rl.node.runtime.toolcache import warm_up

    go = shutil.which("go")
    if go is None:
        pytest.skip("no go here")
    first = warm_up("go", {"go": go}, root=tmp_path)
    assert first is not None and first.before_start and first.build is not None
    assert first.env == ()  # nothing to point at yet: a session keeps a cache of its own
    asyncio.run(first.build())
    ready = warm_up("go", {"go": go}, root=tmp_path)
    assert ready is not None and ready.build is None
    ((name, cache),) = ready.env
    assert name == "GOCACHE" and Path(cache).is_dir() and any(Path(cache).rglob("*-a"))
    assert ready.binds == (Path(cache).parent,)
    modes = {p.stat().st_mode & 0o777 for p in Path(cache).rglob("*")}
    assert modes <= {0o755, 0o644}, modes  # the sandbox uid reads every entry
    assert not [p for p in Path(cache).parent.iterdir() if p.name.startswith(".work-")]


def test_go_sessions_share_a_build_cache_none_of_them_can_write(
    local_client: Any, need: Any
) -> None:
    """The warm cache is read-only in every session: no session leaves anything in it for
    another; builds still work (including a package compiled afresh, not cached)."""
    need("go")
    script = (
        'go env GOCACHE; touch "$(go env GOCACHE)/left-behind" 2>/dev/null && echo WROTE; '
        'cd /tmp && printf \'package main\\nimport ("fmt"; "regexp")\\n'
        'func main() { fmt.Println(regexp.MustCompile("b+").FindString("abbc")) }\\n'
        "' > m.go && go build -o m m.go && ./m"
    )
    outputs = [local_client.exec_once("go", command=script, timeout_seconds=120) for _ in range(2)]
    for result in outputs:
        assert result.exit_code == 0, result.stderr
        cache, answer = result.stdout.split()
        assert cache.endswith("/cache") and answer == "bb", result.stdout
    assert outputs[0].stdout == outputs[1].stdout  # one cache for every session
    assert not Path(outputs[0].stdout.split()[0], "left-behind").exists()
