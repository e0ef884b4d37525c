"""No-op latency hop by hop: HTTP alone, a session's exec of ``:`` and of ``pass``, ``env.step``.

    .venv/bin/python benchmarks/noop_split.py [--samples 150] [--rounds 3]

Starts a node (``collimate serve`` on a unix socket, from a temporary directory) and
prints the p50 in ms of each no-op, median over ``rounds`` rounds of ``samples`` each, and
the client's own CPU per call of the direct calls (thread time: what the client library
costs) and everyone's (client, node and sandboxes: a cpuacct cgroup as root, else the
machine's busy time):

* ``get``: ``GET /sessions/{id}``, the client and the node's HTTP with no sandbox work;
* ``exec ':'`` and ``exec pass``: a light session's exec of a shell no-op and a Python one;
* ``env.step(':')``: ``collimate/Shell-v0``'s step, the target's no-op.

Run it against another checkout with ``PYTHONPATH=<checkout>`` (from a directory that is no
checkout's root) to compare builds side by side, alternating the two.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import _local_node

from collimate_rl.bench.cpu import CpuMeter
from collimate_rl.bench.latency import shell_step_latencies
from collimate_rl.bench.stats import latencies_ms
from collimate_rl.wire import CollimateClient


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    meter = CpuMeter.start()  # before the node: it and its sandboxes join the count
    node, sock = _local_node.start("collimate-noop-")
    try:
        client = CollimateClient(unix_socket=sock, timeout=60)
        _local_node.wait_ready(client, node)
        session = str(client.create_session("python3")["session_id"])
        probes: dict[str, Callable[[], list[float]]] = {
            "get": lambda: latencies_ms(lambda: client.get_session(session), args.samples, 5),
            "exec ':'": lambda: latencies_ms(
                lambda: client.session_exec(session, command=":"), args.samples, 5
            ),
            "exec pass": lambda: latencies_ms(
                lambda: client.session_exec(session, code="pass"), args.samples, 5
            ),
            "env.step(':')": lambda: shell_step_latencies(client, args.samples),
        }
        p50s: dict[str, list[float]] = {name: [] for name in probes}
        cpu: dict[str, list[float]] = {name: [] for name in probes}
        everyone: dict[str, list[float]] = {name: [] for name in probes}
        for _ in range(args.rounds):
            for name, probe in probes.items():
                start, spent = time.thread_time(), meter.read()
                p50s[name].append(statistics.median(probe()))
                cpu[name].append((time.thread_time() - start) * 1000 / (args.samples + 5))
                everyone[name].append((meter.read() - spent) / (args.samples + 5))
        print("  ".join(f"{name} {statistics.median(v):.2f}" for name, v in p50s.items()))
        direct = [name for name in probes if not name.startswith("env.")]  # (no env set-up)
        print(
            "client CPU ms per call: "
            + "  ".join(f"{name} {statistics.median(cpu[name]):.2f}" for name in direct)
        )
        print(
            f"all CPU ms per call ({meter.kind}): "
            + "  ".join(f"{name} {statistics.median(v):.2f}" for name, v in everyone.items())
        )
        client.delete_session(session)
    finally:
        _local_node.stop(node, sock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
