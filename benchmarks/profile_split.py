"""CPU per GRPO rollout, split into client, node and sandboxes (root; cgroup-v1 cpuacct).

    sudo .venv/bin/python benchmarks/profile_split.py [--rounds 3] [--task-set humaneval]

Starts a node (``collimate serve`` on a unix socket) in its own cpuacct cgroup, moves the
template container into a third one once it is up (every session forks from it), and runs
G=4 x K=8 vector-env episodes from this process (the client's cgroup), counting ``reset``
and ``step`` apart; then the warm-fork floor on the same rollouts. Run it against another
checkout with ``PYTHONPATH=<checkout>`` to compare builds side by side.

The sandboxes' share is split further by process (``/proc/<pid>/stat``, both phases
together): the template master itself, its live children (workers, session servers) and
the children it reaped during the run (boxes; before light sessions, session servers
and everything below them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import _local_node
from _proc import usage

BASE = Path("/sys/fs/cgroup/cpuacct")
PARTS = ("client", "node", "sandboxes")


def _enter(part: str, pid: int) -> None:
    (BASE / f"collimate-split-{part}" / "cgroup.procs").write_text(str(pid))


def _usage() -> dict[str, float]:
    return {
        p: int((BASE / f"collimate-split-{p}" / "cpuacct.usage").read_text()) / 1e6 for p in PARTS
    }


def _kids(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
    return out


def _master(node_pid: int) -> int:
    """The template master: the first supervisor process below the node."""
    for pid in sorted(_descendants(node_pid)):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if os.path.basename(argv[0]).startswith(b"python") and b"master" in argv:
                return pid
    raise RuntimeError("no template master")


def _split(master: int) -> dict[str, float]:
    own, reaped = usage(master)[:2]
    live = 0.0
    for kid in _kids(master):
        with contextlib.suppress(OSError):
            live += sum(usage(kid)[:2])
    return {"master": own, "live children": live, "reaped children": reaped}


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--task-set", default="humaneval")
    args = parser.parse_args()
    if os.geteuid() != 0 or not (BASE / "cgroup.procs").exists():
        print("needs root and a cgroup-v1 cpuacct hierarchy", file=sys.stderr)
        return 2
    for part in PARTS:
        (BASE / f"collimate-split-{part}").mkdir(exist_ok=True)
    node, sock = _local_node.start(
        "collimate-split-", preexec_fn=lambda: _enter("node", os.getpid())
    )
    try:
        return _run(node, sock, args.rounds, args.task_set)
    finally:
        _local_node.stop(node, sock)
        (BASE / "cgroup.procs").write_text(str(os.getpid()))
        time.sleep(0.5)
        for part in PARTS:
            with contextlib.suppress(OSError):
                (BASE / f"collimate-split-{part}").rmdir()
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(sock))


def _run(node: subprocess.Popen[bytes], sock: str, rounds: int, task_set: str) -> int:
    from collimate_envs import info as keys
    from collimate_rl.bench import grpo
    from collimate_rl.bench.baselines import WarmForkClient
    from collimate_rl.bench.stats import batch_rate
    from collimate_rl.bench.workload import Rollout, group_completions, plain_program
    from collimate_rl.wire import CollimateClient

    client = CollimateClient(unix_socket=sock)
    _local_node.wait_ready(client, node)
    for pid in _descendants(node.pid)[1:]:
        with contextlib.suppress(OSError):
            _enter("sandboxes", pid)
    _enter("client", os.getpid())
    master = _master(node.pid)
    envs = grpo.open_vector_env(client, task_set, 4, 8)
    env = envs.unwrapped
    tasks = {t.task_id: t for t in env.tasks.tasks}
    spent = {"reset": dict.fromkeys(PARTS, 0.0), "step": dict.fromkeys(PARTS, 0.0)}
    rollouts: list[Rollout] = []
    split0: dict[str, float] = {}
    for r in range(-1, rounds):
        if r == 0:
            split0 = _split(master)
        u0 = _usage()
        _, infos = envs.reset(seed=1000 + r)
        u1 = _usage()
        members = [tasks[str(infos[keys.TASK_ID][i])] for i in range(32)]
        actions = [c for g in range(4) for c in group_completions(members[g * 8], 8)]
        envs.step(tuple(actions))
        u2 = _usage()
        if r < 0:
            continue
        pairs = enumerate(zip(members, actions, strict=True))
        rollouts += [Rollout(t, c, (i % 8) % 2 == 0) for i, (t, c) in pairs]
        for part in PARTS:
            spent["reset"][part] += u1[part] - u0[part]
            spent["step"][part] += u2[part] - u1[part]
    split1 = _split(master)
    envs.close()
    n = len(rollouts)
    for phase in ("step", "reset"):
        cells = "  ".join(f"{p} {spent[phase][p] / n:.2f}" for p in PARTS)
        print(f"{phase:5s} ms/rollout: {cells}  total {sum(spent[phase].values()) / n:.2f}")
    cells = "  ".join(f"{k} {(split1[k] - split0.get(k, 0.0)) / n:.2f}" for k in split1)
    print(f"sandboxes by process, ms/rollout (clock ticks): {cells}")
    programs = [plain_program(r.task, r.completion) for r in rollouts]
    with WarmForkClient() as floor:
        floor.exec_once("python3", code=programs[0])
        u0 = _usage()
        batch_rate(lambda p: floor.exec_once("python3", code=p, timeout_seconds=30), programs, 2)
        u1 = _usage()
    print(f"floor ms/rollout: {sum(u1[p] - u0[p] for p in PARTS) / n:.2f}")
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
