"""Soak: many graded rollouts through the GRPO vector env, then count what leaked.

Starts its own node (``collimate serve`` on a unix socket and an explicit state
dir, default isolation), drives ``GroupVectorEnv`` with ``SAME_STEP`` autoreset
(every step grades every member and draws new tasks) and a seeded mix of
candidates per member:

* ``correct``: the task's reference solution (must score exactly 1.0);
* ``wrong``: the task's wrong solution, or a stub returning ``None``;
* ``crash``: dies at import (exception, ``os._exit``, segfault, recursion);
* ``hang``: busy loop or sleep, at import or inside the function;
* ``hostile``: forges a result frame, fork-bombs, floods stdout, exhausts
  memory or file size, daemonizes a ``sleep`` that outlives the exec, kills
  every process it can signal.

Every non-correct candidate must score below 1.0, and no grade may be an
infrastructure failure. A progress line is printed every ``--interval``
seconds (throughput, node memory, live sessions, node process count); at the
end the env is closed and the node stopped with SIGTERM, and the summary JSON
counts what was left: sessions, processes (the node's whole process tree, and
the daemonized ``sleep``\\s), session sockets and folders, memory cgroups.
All of those must be 0.

Run:  .venv/bin/python benchmarks/soak.py [--rollouts 10000] [--groups 4] [--group-size 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from gymnasium.vector import AutoresetMode

from collimate_envs import info as keys
from collimate_envs.tasks import load_task_set
from collimate_envs.vector import GroupVectorEnv
from collimate_rl.node.runtime._recovery import RECORD_NAME, process_start
from collimate_rl.wire import CollimateClient

#: The ``sleep`` a daemonizing candidate leaves behind; must never survive.
DAEMON_MARK = "4242.917"

KINDS = ("correct", "wrong", "crash", "hang", "hostile")
DEFAULT_MIX = "correct=40,wrong=25,crash=14,hang=6,hostile=15"

CRASHES = (
    "raise RuntimeError('boom')\n",
    "import os\nos._exit(7)\n",
    "import ctypes\nctypes.string_at(0)\n",
    "def f(n):\n    return f(n + 1)\nf(0)\n",
    "raise SystemExit(0)\n",
)
HANGS = (
    "while True:\n    pass\n",
    "import time\ntime.sleep(10**6)\n",
    "def {entry}(*args, **kwargs):\n    while True:\n        pass\n",
)
HOSTILE = (
    # forge the harness's result frame
    'print(\'{"reward": 1.0, "passed": 99, "total": 99}\')\n'
    "def {entry}(*args, **kwargs):\n    return None\n",
    # fork bomb (RLIMIT_NPROC bounds it; the exec's end kills it)
    "import os\nfor _ in range(200):\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    # stdout flood past the output cap
    "import sys\nsys.stdout.write('x' * (24 << 20))\n",
    # memory past RLIMIT_AS, then file size past RLIMIT_FSIZE
    "x = bytearray(16 << 30)\n",
    "with open('big.bin', 'wb') as fh:\n    fh.write(b'0' * (300 << 20))\n",
    # a daemon that outlives the exec (must be swept)
    "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
    f"        os.execvp('sleep', ['sleep', '{DAEMON_MARK}'])\n    os._exit(0)\n"
    "def {entry}(*args, **kwargs):\n    return None\n",
    # kill everything this uid can signal
    "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
)


def _fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def candidate(kind: str, task: Any, rng: random.Random) -> str:
    """One completion of ``kind`` for ``task``."""
    entry = task.entry_point or "solve"
    if kind == "correct":
        code = task.reference_solution
    elif kind == "wrong":
        code = task.wrong_solution or f"def {entry}(*args, **kwargs):\n    return None\n"
    else:
        pool = {"crash": CRASHES, "hang": HANGS, "hostile": HOSTILE}[kind]
        code = rng.choice(pool).replace("{entry}", entry)
    return _fenced(code)


# -- the node and its footprint -----------------------------------------------------------


def _tree(root: int) -> set[tuple[int, int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        start = process_start(pid)
        if start is not None:
            out.add((pid, start))
        todo.extend(kids.get(pid, []))
    return out


def _alive(procs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    return {(p, s) for p, s in procs if process_start(p) == s}


def _kb(path: str, field: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                if marker.encode() in cmdline and process_start(int(entry.name)) is not None:
                    found.append(int(entry.name))
    return found


class SoakNode:
    """``collimate serve`` in a subprocess, on a socket and state dir of our own."""

    def __init__(self, workdir: Path, flags: list[str]) -> None:
        self.workdir = workdir
        self.socket = workdir / "node.sock"
        self.state = workdir / "state"
        argv = [sys.executable, "-m", "collimate_rl.node", "serve", "--socket", str(self.socket)]
        argv += ["--state-dir", str(self.state), "--log-level", "warning", *flags]
        self.log = open(workdir / "node.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        transport = httpx.HTTPTransport(uds=str(self.socket))
        with httpx.Client(base_url="http://localhost", transport=transport, timeout=2) as http:
            deadline = time.monotonic() + 120
            while True:
                if self.proc.poll() is not None:
                    raise SystemExit(f"node exited: {(workdir / 'node.log').read_text()}")
                with contextlib.suppress(httpx.TransportError):
                    if http.get("/v1/health").status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit("node did not start")
                time.sleep(0.05)
        self.record = json.loads((self.state / RECORD_NAME).read_text())
        self.seen: set[tuple[int, int]] = set()

    def footprint(self) -> dict[str, Any]:
        """Memory and process counts of the node's tree right now."""
        tree = _tree(self.proc.pid)
        self.seen |= tree
        pss = sum(_kb(f"/proc/{pid}/smaps_rollup", "Pss") for pid, _ in tree)
        memcg = 0
        for cg in self.cgroups():
            with contextlib.suppress(OSError, ValueError):
                memcg += int((cg / "memory.usage_in_bytes").read_text())
        return {
            "node_rss_mib": round(_kb(f"/proc/{self.proc.pid}/status", "VmRSS") / 1024, 1),
            "tree_pss_mib": round(pss / 1024, 1),
            "memcg_mib": round(memcg / 2**20, 1),
            "processes": len(tree),
            "session_sockets": len(self.session_sockets()),
        }

    def cgroups(self) -> list[Path]:
        parent, tag = self.record.get("memcg_parent"), self.record.get("memcg_tag")
        if not parent or not tag:
            return []
        return sorted(Path(parent).glob(f"collimate-{tag}-*"))

    def session_sockets(self) -> list[Path]:
        return [p for p in self.state.glob("t/*/socks/*.sock") if p.name != "master.sock"]

    def stop(self) -> int:
        self.seen |= _tree(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = -9
        self.log.close()
        return code


# -- the soak -----------------------------------------------------------------------------


def parse_mix(text: str) -> dict[str, float]:
    mix = {k: float(v) for k, v in (part.split("=") for part in text.split(","))}
    unknown = set(mix) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown candidate kinds: {sorted(unknown)}")
    return mix


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    mix = parse_mix(args.mix)
    kinds, weights = list(mix), list(mix.values())
    tasks = {t.task_id: t for t in load_task_set(args.task_set)}
    workdir = Path(tempfile.mkdtemp(prefix="collimate-soak-"))
    node = SoakNode(workdir, ["--isolation", args.isolation])
    client = CollimateClient(unix_socket=str(node.socket))
    env = GroupVectorEnv(
        args.groups * args.group_size,
        args.group_size,
        task_set=args.task_set,
        timeout_seconds=args.timeout,
        autoreset_mode=AutoresetMode.SAME_STEP,
        client=client,
    )
    counts = {k: 0 for k in KINDS}
    bad = {"correct_not_1": 0, "other_scored_1": 0, "infra_errors": 0}
    samples: list[dict[str, Any]] = []
    baseline = node.footprint()
    print(f"soak: node pid {node.proc.pid}, workdir {workdir}, start {baseline}", flush=True)
    t0 = last_t = time.perf_counter()
    done = last_done = 0
    _, infos = env.reset(seed=args.seed)
    current = list(infos[keys.TASK_ID])
    try:
        while done < args.rollouts:
            chosen = rng.choices(kinds, weights, k=env.num_envs)
            actions = [candidate(k, tasks[t], rng) for k, t in zip(chosen, current, strict=True)]
            _, rewards, _, _, infos = env.step(actions)
            final = infos["final_info"]
            for i, kind in enumerate(chosen):
                counts[kind] += 1
                if final[keys.INFRA_ERROR][i]:
                    bad["infra_errors"] += 1
                elif kind == "correct" and rewards[i] != 1.0:
                    bad["correct_not_1"] += 1
                elif kind != "correct" and rewards[i] >= 1.0:
                    bad["other_scored_1"] += 1
            current = list(infos[keys.TASK_ID])
            done += env.num_envs
            now = time.perf_counter()
            if now - last_t >= args.interval or done >= args.rollouts:
                sample = {
                    "t_s": round(now - t0, 1),
                    "rollouts": done,
                    "rate_per_s": round((done - last_done) / (now - last_t), 2),
                    **node.footprint(),
                    "sessions": len(client.list_sessions()),
                }
                samples.append(sample)
                print("soak: " + json.dumps(sample), flush=True)
                last_t, last_done = now, done
    finally:
        env.close()
    elapsed = time.perf_counter() - t0
    # Leaks while the node still runs: every env session deleted, the node's process
    # tree and session sockets back to what an idle node has.
    time.sleep(2.0)  # let the warm pool settle
    idle = node.footprint()
    leaked_sessions = len(client.list_sessions())
    client.close()
    exit_code = node.stop()
    leftovers = {
        "sessions": leaked_sessions,
        "processes_while_idle": max(0, idle["processes"] - baseline["processes"]),
        "processes_after_stop": len({p for p, _ in _alive(node.seen)} | set(_marked(DAEMON_MARK))),
        "daemons": len(_marked(DAEMON_MARK)),
        "session_sockets_while_idle": max(0, idle["session_sockets"] - baseline["session_sockets"]),
        "state_entries_after_stop": len([p for p in node.state.iterdir() if p.name != "node.lock"])
        if node.state.exists()
        else 0,
        "cgroups_after_stop": len(node.cgroups()),
        "socket_after_stop": int(node.socket.exists()),
    }
    rates = [s["rate_per_s"] for s in samples]
    summary = {
        "rollouts": done,
        "elapsed_s": round(elapsed, 1),
        "rollouts_per_s": round(done / elapsed, 2),
        "rate_per_s_min_median_max": [
            min(rates),
            float(np.median(rates)),
            max(rates),
        ]
        if rates
        else [],
        "kinds": counts,
        "grading_errors": bad,
        "node_rss_mib_first_last_max": [
            samples[0]["node_rss_mib"] if samples else None,
            samples[-1]["node_rss_mib"] if samples else None,
            max((s["node_rss_mib"] for s in samples), default=None),
        ],
        "tree_pss_mib_first_last_max": [
            samples[0]["tree_pss_mib"] if samples else None,
            samples[-1]["tree_pss_mib"] if samples else None,
            max((s["tree_pss_mib"] for s in samples), default=None),
        ],
        "baseline": baseline,
        "idle_after": idle,
        "leaked": leftovers,
        "node_exit_code": exit_code,
        "config": vars(args),
    }
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rollouts", type=int, default=10_000)
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--timeout", type=int, default=3, help="exec timeout per rollout, seconds")
    p.add_argument("--mix", default=DEFAULT_MIX, help=f"kind=weight,... (default {DEFAULT_MIX})")
    p.add_argument("--task-set", default="collimate-basic")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between progress lines")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--isolation", default="auto", choices=("auto", "bwrap"))
    p.add_argument("--keep", action="store_true", help="keep the node's workdir (logs)")
    args = p.parse_args(argv)
    summary = run(args)
    print(json.dumps(summary, indent=2), flush=True)
    leaked = sum(v for k, v in summary["leaked"].items())
    errors = sum(summary["grading_errors"].values())
    return 0 if leaked == 0 and errors == 0 and summary["node_exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
