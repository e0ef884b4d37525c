"""The node as a process: ``LocalNode``, drain on SIGTERM, a clean stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from collimate_rl.node import LocalNode

from . import fakes
from .conftest import _pick_runtime


@pytest.fixture
def node_kwargs(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Start the subprocess on the real runtime when the tests use it, else on the fake."""
    _, kind = _pick_runtime()
    if kind.startswith("real"):
        isolation = kind.split(":", 1)[1]
        return {"isolation": "auto" if isolation == "auto" else isolation}
    depth = len(fakes.__name__.split("."))
    root = Path(fakes.__file__).resolve().parents[depth - 1]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    return {
        "isolation": "none",
        "extra_args": ("--runtime-factory", f"{fakes.__name__}:create_fake_runtime"),
    }


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def _template(http: httpx.Client) -> str:
    templates = http.get("/v1/health").json()["templates"]
    return "python3" if "python3" in templates else templates[0]


def test_drain_on_sigterm(node_kwargs: dict[str, object]) -> None:
    node = LocalNode(drain_timeout=20, pool_size=1, **node_kwargs)  # type: ignore[arg-type]
    with node:
        assert node.socket_path is not None and node.workdir is not None
        socket_path, state_dir = node.socket_path, node.workdir / "state"
        with node.http() as http:
            tpl = _template(http)
            sid = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]
            other = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]
            results: list[httpx.Response] = []

            def slow() -> None:
                with node.http() as own:
                    results.append(
                        own.post(
                            f"/v1/sessions/{sid}/exec",
                            json={"command": "sleep 2.0731 && echo finished"},
                        )
                    )

            worker = threading.Thread(target=slow)
            worker.start()
            import time

            time.sleep(0.7)
            assert node.pid is not None
            os.kill(node.pid, signal.SIGTERM)
            time.sleep(0.4)
            try:
                refused = http.post("/v1/sessions", json={"template_id": tpl})
                assert refused.status_code == 503
                assert refused.json()["error_code"] == "draining"
                refused = http.post(f"/v1/sessions/{other}/exec", json={"command": "true"})
                assert refused.json()["error_code"] == "draining"
                assert http.get("/v1/health").json()["status"] == "draining"
            except httpx.TransportError:
                pass  # already gone: connection refused is fine too
            worker.join(30)
        assert results and results[0].status_code == 200, results
        assert results[0].json()["stdout"] == "finished\n"
        assert node.wait(timeout=30) == 0
        assert not socket_path.exists()
        assert not state_dir.exists() or not any(state_dir.iterdir())
        assert _processes_with("2.0731") == []
    assert node.workdir is None


def test_drain_timeout_bounds_the_wait(node_kwargs: dict[str, object]) -> None:
    """A drain does not wait past --drain-timeout; cleanup still happens (SIGINT drains too)."""
    import time

    with LocalNode(drain_timeout=1, pool_size=0, **node_kwargs) as node:  # type: ignore[arg-type]
        assert node.workdir is not None and node.pid is not None
        state_dir = node.workdir / "state"
        with node.http() as http:
            tpl = _template(http)
            sid = http.post("/v1/sessions", json={"template_id": tpl}).json()["session_id"]

            def stuck() -> None:
                with node.http() as own, contextlib.suppress(httpx.TransportError):
                    own.post(f"/v1/sessions/{sid}/exec", json={"command": "sleep 60.0417"})

            worker = threading.Thread(target=stuck, daemon=True)
            worker.start()
            time.sleep(0.7)
            start = time.monotonic()
            os.kill(node.pid, signal.SIGINT)
            assert node.wait(timeout=30) == 0
            assert time.monotonic() - start < 15
            worker.join(10)
        assert not state_dir.exists() or not any(state_dir.iterdir())
        time.sleep(0.2)
        assert _processes_with("60.0417") == []


def test_local_node_cleans_up_when_body_raises(node_kwargs: dict[str, object]) -> None:
    seen: dict[str, object] = {}
    with pytest.raises(ZeroDivisionError), LocalNode(tcp=True, **node_kwargs) as node:  # type: ignore[arg-type]
        seen["pid"], seen["workdir"] = node.pid, node.workdir
        with node.http() as http:
            assert http.get("/v1/health").json()["status"] == "ok"
            assert node.base_url.startswith("http://127.0.0.1:")
        # Over TCP the node gets a fresh token: other local users cannot use it.
        assert node.token is not None and node.workdir is not None
        assert httpx.get(node.base_url + "/v1/health").status_code == 401
        assert (node.workdir / "token").stat().st_mode & 0o077 == 0
        assert node.client().health()["status"] == "ok"
        1 / 0  # noqa: B018
    workdir = seen["workdir"]
    assert isinstance(workdir, Path) and not workdir.exists()
    pid = seen["pid"]
    assert isinstance(pid, int)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_local_node_client(node_kwargs: dict[str, object]) -> None:
    wire = pytest.importorskip("collimate_rl.wire")
    if not hasattr(wire, "CollimateClient"):
        pytest.skip("collimate_rl.wire.CollimateClient has not landed")
    with LocalNode(**node_kwargs) as node:  # type: ignore[arg-type]
        client = node.client()
        health = client.health()
        assert health["status"] == "ok"
        tpl = "python3" if "python3" in health["templates"] else health["templates"][0]
        out = client.exec_once(tpl, code="print(6 * 7)")
        assert _get(out, "stdout") == "42\n"
        sid = _get(client.create_session(tpl), "session_id")
        res = client.session_exec(sid, command="echo hi", seed="ab" * 32)
        assert _get(res, "stdout") == "hi\n" and _get(res, "seed") == "ab" * 32
        fork = client.fork_session(sid, 2)
        kids = [_get(child, "session_id") for child in _get(fork, "children")]
        assert len(kids) == 2
        assert {_get(s, "session_id") for s in client.list_sessions()} >= {sid, *kids}
        for one in (sid, *kids):
            assert _get(client.delete_session(one), "deleted") is True
        assert _get(client.delete_session(sid), "deleted") is False


def test_a_package_in_the_current_directory_does_not_become_the_node(
    node_kwargs: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another version's checkout in the cwd would otherwise run as the node (``-m`` puts
    # the cwd first), with a grading harness that differs from this client's.
    (tmp_path / "collimate_rl").mkdir()
    (tmp_path / "collimate_rl" / "__init__.py").write_text("raise ImportError('the cwd copy')\n")
    monkeypatch.chdir(tmp_path)
    with LocalNode(**node_kwargs) as node:  # type: ignore[arg-type]
        assert node.client().health()["status"] == "ok"


def _get(obj: object, key: str) -> Any:
    return obj[key] if isinstance(obj, dict) else getattr(obj, key)


def test_stale_socket_is_replaced_and_live_one_refused(tmp_path: Path) -> None:
    import socket as socket_mod

    from collimate_rl.node.server import bind_unix_socket

    path = tmp_path / "s.sock"
    first = bind_unix_socket(path)
    assert oct(path.stat().st_mode & 0o777) == "0o660"
    with pytest.raises(OSError, match="already listening"):
        bind_unix_socket(path)
    first.close()  # the file stays: a stale socket
    second = bind_unix_socket(path)
    probe = socket_mod.socket(socket_mod.AF_UNIX)
    probe.connect(str(path))
    probe.close()
    second.close()


def serve_node(tmp: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``collimate serve`` on a unix socket and a state dir in ``tmp``; its output merged, text."""
    where = ["--socket", str(tmp / "n.sock"), "--state-dir", str(tmp / "state")]
    return subprocess.Popen(
        [sys.executable, "-m", "collimate_rl.node", "serve", *where, *flags],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def start_up_line(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """A serving node's start-up line, and the rest of its output once SIGTERM stopped it.

    A node that does not stop within ``timeout`` is killed: never left serving.
    """
    assert proc.stdout is not None
    try:
        serving = next((line for line in proc.stdout if "collimate node serving on" in line), "")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return serving, out


def _serve_fake(tmp: Path, **env: str) -> subprocess.Popen[str]:
    depth = len(fakes.__name__.split("."))
    root = Path(fakes.__file__).resolve().parents[depth - 1]
    full_env = {**os.environ, "PYTHONPATH": str(root), **env}
    factory = f"{fakes.__name__}:create_fake_runtime"
    return serve_node(tmp, "--runtime-factory", factory, env=full_env)


def test_failed_start_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    proc = _serve_fake(tmp_path, FAKE_RUNTIME_FAIL_START="1")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "collimate serve: RuntimeError_: template host failed" in out
    assert "Traceback" not in out
    assert not (tmp_path / "n.sock").exists()


def test_sigterm_during_startup_stops_cleanly(tmp_path: Path) -> None:
    import time

    proc = _serve_fake(tmp_path, FAKE_RUNTIME_START_DELAY="1.5")
    assert proc.stdout is not None
    for line in proc.stdout:  # read up to the marker
        if line.strip() == "fake runtime starting":
            break
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert not (tmp_path / "n.sock").exists()
    assert not (tmp_path / "state").exists()


def test_local_node_stops_when_its_owner_is_killed(
    node_kwargs: dict[str, object], tmp_path: Path
) -> None:
    # An owner process starts a node, opens a session and is SIGKILLed: no
    # cleanup code of its own runs, yet the node drains and exits by itself.
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from collimate_rl.node import LocalNode\n"
            f"node = LocalNode(**{node_kwargs!r}).start()\n"
            "client = node.client()\n"
            "template = client.health()['templates'][0]\n"
            "client.create_session('python3' if 'python3' in client.health()['templates'] else template)\n"
            "print(node.pid, node.workdir, flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline().split()
        assert line, "the owner did not start its node"
        node_pid, workdir = int(line[0]), Path(line[1])
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 60
        while _alive(node_pid):
            assert time.monotonic() < deadline, "the node outlived its owner"
            time.sleep(0.1)
        assert not (workdir / "state").exists()  # the drain removed sessions and state
        assert not (workdir / "node.sock").exists()
        assert not workdir.exists()  # and the folder LocalNode made for it, log and all
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_signals_to_the_owners_process_group_do_not_reach_its_node(
    node_kwargs: dict[str, object],
) -> None:
    # Jupyter interrupts a kernel, as a terminal's Ctrl-C does a job, with a SIGINT to the
    # whole process group, and shuts it down with a SIGTERM to the group. The node is not in
    # it: after the SIGINT it still serves its owner, and after the SIGTERM (which ends the
    # owner before its own clean-up ran) it stops as an orphan does and removes its folder.
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys\n"
            "from collimate_rl.node import LocalNode\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a kernel does: it goes on\n"
            f"node = LocalNode(**{node_kwargs!r}).start()\n"
            "client = node.client()\n"
            "print(node.pid, node.workdir, flush=True)\n"
            "for _ in sys.stdin:\n"
            "    template = client.health()['templates'][0]\n"
            "    client.delete_session(client.create_session(template)['session_id'])\n"
            "    print('served', flush=True)\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        start_new_session=True,  # its own group, which this test signals
    )
    try:
        assert owner.stdin is not None and owner.stdout is not None
        line = owner.stdout.readline().split()
        assert line, "the owner did not start its node"
        node_pid, workdir = int(line[0]), Path(line[1])
        os.killpg(owner.pid, signal.SIGINT)
        time.sleep(1.0)  # (a node that took it drains and exits well within this)
        owner.stdin.write("go\n")
        owner.stdin.flush()
        assert owner.stdout.readline() == "served\n"
        os.killpg(owner.pid, signal.SIGTERM)
        owner.wait(10)
        deadline = time.monotonic() + 60
        while _alive(node_pid) or workdir.exists():
            assert time.monotonic() < deadline, "the node or its folder outlived the owner"
            time.sleep(0.1)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def _alive(pid: int) -> bool:
    # The node is the killed owner's orphan (reparented, not our child): a
    # zombie still counts as exited.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_node_serves_on_uvloop(tmp_path: Path) -> None:
    # The node extra installs uvloop, and the node runs its event loop on it (and says so).
    pytest.importorskip("uvloop")
    proc = _serve_fake(tmp_path)
    serving, out = start_up_line(proc, timeout=30)
    assert "event loop: uvloop" in serving, serving + out
    assert proc.returncode == 0, out


@pytest.mark.parametrize("installed", [True, False])
def test_the_event_loop_is_asyncios_without_uvloop(
    installed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from collimate_rl.node.server import run_event_loop

    if installed:
        pytest.importorskip("uvloop")
    else:
        monkeypatch.setitem(sys.modules, "uvloop", None)  # (an import of it fails)
    seen: list[str] = []

    async def main() -> None:
        await asyncio.sleep(0)
        seen.append(type(asyncio.get_running_loop()).__module__.split(".")[0])

    run_event_loop(main())
    assert seen == ["uvloop" if installed else "asyncio"]


def test_a_signal_noted_during_start_up_drains_the_server_once_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A SIGTERM after start-up's last look at the early signals, but before uvicorn takes
    # them over, is only noted: the server's first tick must still drain and stop.
    import asyncio
    import types

    import uvicorn

    from collimate_rl.node import server

    drained: list[str] = []

    async def wait_drained(timeout: float) -> bool:
        drained.append("waited")
        return True

    node = types.SimpleNamespace(
        begin_drain=lambda: drained.append("began"),
        wait_drained=wait_drained,
        config=types.SimpleNamespace(drain_timeout=1.0),
    )
    monkeypatch.setattr(server, "_early_stop", [signal.SIGTERM])
    node_server = server.NodeServer(uvicorn.Config(app=None), node)  # type: ignore[arg-type]

    async def tick() -> None:
        await node_server.on_tick(0)
        assert node_server._drain_task is not None
        await node_server._drain_task

    asyncio.run(tick())
    assert drained == ["began", "waited"] and node_server.should_exit
