"""CPU, page faults and context switches per GRPO rollout, by process (``perf stat -p``).

    .venv/bin/python benchmarks/perf_by_process.py [--episodes 8] [--no-inherit]

Starts a node on a unix socket, opens the G=4 x K=8 HumanEval vector env, warms it up with one
episode, then counts with ``perf stat`` attached to each of: the template's zygote (and, unless
``--no-inherit``, the boxes it clones), its master, its workers, the node and this process (the
client) while it steps ``--episodes`` episodes. Then the warm-fork floor's zygote (and the
children it forks) on the same rollouts, two at a time. Each line is per rollout. Run it
against another checkout with ``PYTHONPATH=<checkout>`` to compare builds side by side.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import _local_node

EVENTS = "task-clock,minor-faults,context-switches"


def _named(tree: list[int], prefix: str) -> list[int]:
    """The processes of ``tree`` whose name starts with ``prefix`` (not another node's)."""
    found = []
    for pid in tree:
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().startswith(prefix):
                    found.append(pid)
        except OSError:
            continue  # gone meanwhile
    return found


def _attach(pids: list[int], inherit: bool) -> subprocess.Popen[str]:
    """Start counting ``pids`` (with the children they start, when ``inherit``)."""
    options = [] if inherit else ["--no-inherit"]
    argv = ["perf", "stat", *options, "-x,", "-e", EVENTS, "-p", ",".join(map(str, pids))]
    return subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)


def _report(counter: subprocess.Popen[str], rollouts: int, label: str) -> None:
    counter.send_signal(signal.SIGINT)
    _, err = counter.communicate()
    values = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 3 and fields[0][:1].isdigit():
            values[fields[2]] = float(fields[0]) / rollouts
    shown = ", ".join(
        f"{event} {values.get(event, float('nan')):.3f}" for event in EVENTS.split(",")
    )
    print(f"{label:<28} {shown}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--no-inherit", action="store_true", help="the zygote alone, no boxes")
    args = parser.parse_args()
    inherit = not args.no_inherit

    from collimate_rl.bench import grpo
    from collimate_rl.bench.baselines import WarmForkClient
    from collimate_rl.bench.forks import process_tree
    from collimate_rl.bench.workload import plain_program

    with _local_node.humaneval_groups("collimate-perf-") as (node, _, envs):
        tree = process_tree(node.pid)
        parts = {
            "zygote" + (" + boxes" if inherit else ""): _named(tree, "col-zygote"),
            "master": _named(tree, "col-master"),
            "workers": _named(tree, "col-worker"),
            "node": [node.pid],
            "client": [os.getpid()],
        }
        counters = {label: _attach(pids, inherit) for label, pids in parts.items()}
        rollouts = []
        for episode in range(args.episodes):
            rollouts += grpo.run_episodes(envs, 1, warmup=False, first=episode + 1).rollouts
        for label, counter in counters.items():
            _report(counter, len(rollouts), label)
    programs = [plain_program(r.task, r.completion) for r in rollouts]
    with WarmForkClient() as floor, ThreadPoolExecutor(2) as pool:
        floor.exec_once("python3", code=programs[0])
        counter = _attach([floor.pid], inherit)
        list(pool.map(lambda program: floor.exec_once("python3", code=program), programs))
        _report(counter, len(programs), "floor zygote" + (" + children" if inherit else ""))


if __name__ == "__main__":
    main()
