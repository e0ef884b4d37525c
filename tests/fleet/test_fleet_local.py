"""The fleet's parts that need no Ray cluster: bad input without Ray, host folders, the janitor."""

from __future__ import annotations

import fcntl
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.ray import RayFleet
from collimate_rl.ray._client import FleetClient
from collimate_rl.ray._directory import Directory
from collimate_rl.ray._host import clear_host_folder, sweep_stale_hosts

_HOST = """
import os, subprocess, sys, time
from pathlib import Path
from collimate_rl.ray._host import _claim
from collimate_rl.ray._janitor import spawn
folder, _ = _claim(Path(sys.argv[1]), sys.argv[2])
node = subprocess.Popen(["sleep", "600"])  # stands for the LocalNode
keep = spawn(folder, node.pid) if sys.argv[3] == "janitor" else None
print(node.pid, flush=True)
time.sleep(600)
"""


def _host(root: Path, tag: str, janitor: bool) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(root), tag, "janitor" if janitor else "-"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _wait_gone(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_fleet_needs_ray_running() -> None:
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()  # no test leaves Ray connected
    with pytest.raises(CollimateUsageError, match=r"call ray\.init\(\)"):
        RayFleet().start()
    with pytest.raises(CollimateUsageError, match="not started"):
        RayFleet().client()
    with pytest.raises(CollimateUsageError, match="poll_interval"):
        RayFleet(poll_interval=0)


def test_a_fleet_client_refuses_to_travel() -> None:
    with pytest.raises(CollimateUsageError, match="create the RayFleet in the process"):
        pickle.dumps(FleetClient(Directory()))


def test_the_sweeper_clears_only_dead_hosts_whose_nodes_stopped(tmp_path: Path) -> None:
    live, live_node = _host(tmp_path, "n00000001", janitor=False)
    dead, dead_node = _host(tmp_path, "n00000002", janitor=False)
    draining, draining_node = _host(tmp_path, "n00000003", janitor=False)
    stranger = tmp_path / "hn00000004"
    stranger.mkdir()  # no owner lock: not a host's (or being created)
    # n00000003's "node" still holds its state dir (it drains after its host died).
    state = tmp_path / "hn00000003" / "collimate-node-x" / "state"
    state.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint(flush=True)\ntime.sleep(600)",
            str(state / "node.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        holder.stdout.readline()
        for proc, node in ((dead, dead_node), (draining, draining_node)):
            proc.kill()
            proc.wait()
            os.kill(node, signal.SIGKILL)
        assert sweep_stale_hosts(tmp_path) == 1
        assert not (tmp_path / "hn00000002").exists()
        assert (tmp_path / "hn00000001").exists() and (tmp_path / "hn00000003").exists()
        assert stranger.exists() and not clear_host_folder(stranger)
        holder.kill()
        holder.wait()
        assert sweep_stale_hosts(tmp_path) == 1  # the node stopped: now it goes
        assert not (tmp_path / "hn00000003").exists()
    finally:
        for proc in (live, dead, draining, holder):
            proc.kill()
            proc.wait()
        os.kill(live_node, signal.SIGKILL)


def test_the_janitor_clears_a_host_killed_with_its_node(tmp_path: Path) -> None:
    host, node = _host(tmp_path, "n0000000a", janitor=True)
    folder = tmp_path / "hn0000000a"
    assert (folder / "owner.lock").exists()
    time.sleep(0.5)
    assert folder.exists()  # the janitor waits while its host lives
    host.kill()  # what Ray does to an actor whose driver died ...
    host.wait()
    os.kill(node, signal.SIGKILL)  # ... and to the actor's children
    _wait_gone(folder)
    assert not folder.exists()


def test_the_owner_lock_is_held_from_the_moment_it_exists(tmp_path: Path) -> None:
    host, node = _host(tmp_path, "n0000000b", janitor=False)
    try:
        fd = os.open(tmp_path / "hn0000000b" / "owner.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        host.kill()
        host.wait()
        os.kill(node, signal.SIGKILL)
