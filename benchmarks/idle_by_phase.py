"""Where a GRPO step leaves the CPUs idle: by the client's phase, and by tenths of the request.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/idle_by_phase.py [--seconds 12]

Starts a node on a unix socket, steps the HumanEval G=4 x K=8 vector env, and meanwhile
samples every CPU with ``perf record -a -k CLOCK_MONOTONIC`` (idle included, as ``swapper``),
while this script notes on the same clock when each reset, step and batch request starts and
ends. Each sample is then filed under the phase it fell in:

* ``client: prepare``: from the step's start to its request (extraction, the specs' payloads);
* ``request``: the node and the sandboxes grading the step's members;
* ``client: finish``: from the reply to the step's end (the verdicts, the infos);
* ``client: between`` and ``reset``: the rest of an episode.

Prints each phase's share of the wall time and of the samples, and how much of the CPU time
in it was idle; then the idle share of each tenth of the request (its ramp-up and its tail).
Run it against another checkout with ``PYTHONPATH=<checkout>``.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import _local_node

#: Phase names, by the mark that starts them.
PHASE_AFTER = {
    "reset": "reset",
    "reset_end": "client: between",
    "step": "client: prepare",
    "request": "request",
    "request_end": "client: finish",
    "step_end": "client: between",
}


def samples(lines: Iterable[str]) -> Iterable[tuple[float, int]]:
    """``(time, pid)`` of each line of ``perf script -F comm,pid,cpu,time`` (pid 0: idle)."""
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and fields[-1].endswith(":"):
            try:
                yield float(fields[-1][:-1]), int(fields[-3])
            except ValueError:
                continue


def by_phase(
    marks: list[tuple[str, float]], sampled: Iterable[tuple[float, int]]
) -> dict[str, Any]:
    """Per phase: wall seconds, samples and idle samples; per tenth of a request: the same."""
    marks = sorted(marks, key=lambda mark: mark[1])
    times = [t for _, t in marks]
    wall: defaultdict[str, float] = defaultdict(float)
    for (name, start), (_, end) in itertools.pairwise(marks):
        wall[PHASE_AFTER[name]] += end - start
    requests = [
        (start, end)
        for (name, start), (after, end) in itertools.pairwise(marks)
        if name == "request" and after == "request_end"
    ]
    starts = [start for start, _ in requests]
    busy: Counter[str] = Counter()
    idle: Counter[str] = Counter()
    tenth_all: Counter[int] = Counter()
    tenth_idle: Counter[int] = Counter()
    for t, pid in sampled:
        i = bisect.bisect_right(times, t) - 1
        if i < 0 or i >= len(marks) - 1:
            continue  # before the first mark or after the last
        phase = PHASE_AFTER[marks[i][0]]
        busy[phase] += 1
        idle[phase] += pid == 0
        r = bisect.bisect_right(starts, t) - 1
        if r >= 0 and t < requests[r][1]:
            start, end = requests[r]
            tenth = min(9, int(10 * (t - start) / (end - start)))
            tenth_all[tenth] += 1
            tenth_idle[tenth] += pid == 0
    return {
        "phases": {
            phase: {"seconds": wall[phase], "samples": busy[phase], "idle": idle[phase]}
            for phase in wall
        },
        "tenths": [(tenth_all[k], tenth_idle[k]) for k in range(10)],
        "requests": len(requests),
    }


def report(result: dict[str, Any]) -> str:
    """:func:`by_phase`'s result as text: one line per phase, longest first, then the tenths."""
    phases = result["phases"]
    total_wall = sum(p["seconds"] for p in phases.values()) or 1.0
    total = sum(p["samples"] for p in phases.values()) or 1
    total_idle = sum(p["idle"] for p in phases.values())
    lines = [f"{total} samples, {total_idle / total:.1%} idle, {result['requests']} requests"]
    for name, p in sorted(phases.items(), key=lambda item: -item[1]["seconds"]):
        within = p["idle"] / p["samples"] if p["samples"] else 0.0
        lines.append(
            f"{name:<16} wall {p['seconds'] / total_wall:6.1%}  samples {p['samples'] / total:6.1%}"
            f"  idle within {within:6.1%}  of all idle {p['idle'] / max(total_idle, 1):6.1%}"
        )
    lines.append(
        "idle by tenth of the request: "
        + " ".join(f"{idle / count:.0%}" if count else "-" for count, idle in result["tenths"])
    )
    return "\n".join(lines)


def _marked(envs: Any, client: Any, marks: list[tuple[str, float]]) -> None:
    """Note each reset, step and batch request of ``envs`` in ``marks`` (monotonic clock)."""

    def wrap(owner: Any, attribute: str, name: str) -> None:
        inner = getattr(owner, attribute)

        def marked(*args: Any, **kwargs: Any) -> Any:
            marks.append((name, time.monotonic()))
            try:
                return inner(*args, **kwargs)
            finally:
                marks.append((name + "_end", time.monotonic()))

        setattr(owner, attribute, marked)

    wrap(envs, "reset", "reset")
    wrap(envs, "step", "step")
    wrap(client, "exec_batch", "request")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    args = parser.parse_args()

    from collimate_rl.bench import grpo

    folder = tempfile.mkdtemp(prefix="collimate-idle-")
    data = os.path.join(folder, "perf.data")
    try:
        with _local_node.humaneval_groups("collimate-idle-") as (_, client, envs):
            marks: list[tuple[str, float]] = []
            _marked(envs, client, marks)
            argv = ["perf", "record", "-q", "-a", "-F", "1999", "-k", "CLOCK_MONOTONIC"]
            recorder = subprocess.Popen([*argv, "-o", data], stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf is sampling
            deadline, episode = time.monotonic() + args.seconds, 1
            while time.monotonic() < deadline:
                grpo.run_episodes(envs, 1, warmup=False, first=episode)
                episode += 1
            recorder.send_signal(signal.SIGINT)
            recorder.wait()
        script = subprocess.run(
            ["perf", "script", "-i", data, "-F", "comm,pid,cpu,time"],
            capture_output=True,
            text=True,
            check=True,
        )
        print(report(by_phase(marks, samples(script.stdout.splitlines()))))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
