"""What one grade costs each process of a template, and how large the image they fork is.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/box_cost.py [--grades 300] [--calls 7]

Starts a node (``collimate serve`` on a unix socket), then grades ``--grades`` times, one
after the other, a candidate that passes ``--calls`` unit tests, in one session: every grade
runs in a worker and its candidate in a box the zygote clones. Prints the template's
processes (unique anonymous memory, mappings: what every clone copies and every box's exit
tears down), then per grade the wall time, and the CPU and page faults of the zygote (its
clone, and the copy-on-write faults it takes after), of the boxes (the master's reaped
children: their set-up, the candidate, their exit), of the master and of the workers, from
``/proc``. A fault costs ~3 us here; unlike time, the count does not drift with the
machine's load. Run it against another checkout with ``PYTHONPATH=<checkout>`` (from
outside any checkout) to compare builds side by side; interleave the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from pathlib import Path

import _local_node
from _proc import usage

_PROCESS_NAMES = ("col-master", "col-zygote", "col-worker")


def _processes() -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            name = (entry / "comm").read_text().strip()
            if entry.name.isdigit() and name.startswith(_PROCESS_NAMES):
                found[int(entry.name)] = name
    return found


def _image(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    anon = re.search(r"RssAnon:\s+(\d+)", status)
    maps = len(Path(f"/proc/{pid}/maps").read_text().splitlines())
    return f"{int(anon.group(1)) / 1024 if anon else 0:.2f} MiB anonymous, {maps} mappings"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grades", type=int, default=300)
    parser.add_argument("--calls", type=int, default=7)
    args = parser.parse_args()

    from collimate_rl.grading import UnitTestReward, grade
    from collimate_rl.wire import CollimateClient

    node, sock = _local_node.start("collimate-box-cost-")
    try:
        client = CollimateClient(unix_socket=sock)
        _local_node.wait_ready(client, node)
        answer = "```python\ndef add(a, b):\n    return a + b\n```"
        tests = [{"input": [i, 2], "expected": i + 2} for i in range(args.calls)]
        spec = UnitTestReward(tests, entry="add")
        session = client.create_session("python3").session_id
        for _ in range(20):  # warm: the session's namespace, the workers
            grade(client, "python3", answer, spec, session_id=session)
        ours = {pid: name for pid, name in _processes().items() if _below(pid, node.pid)}
        shown = set()
        for pid, name in sorted(ours.items()):
            role = name.rstrip("-0123456789")  # one worker stands for all
            if role not in shown:
                shown.add(role)
                print(f"{role}: {_image(pid)}")
        before = {pid: usage(pid) for pid in ours}
        started = time.perf_counter()
        for _ in range(args.grades):
            result = grade(client, "python3", answer, spec, session_id=session)
            if result.reward != 1.0:
                raise SystemExit(f"the grade failed: {result}")
        wall = (time.perf_counter() - started) * 1000 / args.grades
        after = {pid: usage(pid) for pid in ours}
        per: dict[str, float] = {"zygote": 0.0, "boxes": 0.0, "master": 0.0, "workers": 0.0}
        faults: dict[str, float] = dict.fromkeys(per, 0.0)
        for pid, name in ours.items():
            own, reaped, own_faults, reaped_faults = (
                (a - b) / args.grades for a, b in zip(after[pid], before[pid], strict=True)
            )
            if name == "col-master":
                per["master"] += own
                per["boxes"] += reaped
                faults["master"] += own_faults
                faults["boxes"] += reaped_faults
            else:
                role = "zygote" if name == "col-zygote" else "workers"
                per[role] += own
                faults[role] += own_faults
        parts = ", ".join(f"{k} {v:.2f}" for k, v in per.items())
        print(f"per grade: wall {wall:.2f} ms; CPU ms: {parts}; total {sum(per.values()):.2f}")
        parts = ", ".join(f"{k} {v:.0f}" for k, v in faults.items())
        print(f"per grade, page faults: {parts}")
    finally:
        _local_node.stop(node, sock)
    return 0


def _below(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


if __name__ == "__main__":
    sys.exit(main())
