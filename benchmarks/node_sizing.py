"""Sizing a node: its memory with many live sessions, and CPU per HumanEval rollout.

    cd /tmp && <venv>/bin/python <checkout>/benchmarks/node_sizing.py [--episodes 20]
        [--sessions 1000]

One node (bwrap) on a unix socket. Reads the node's own process from its ``/metrics``
(``process_resident_memory_bytes``, ``process_cpu_seconds_total``) and the node's whole
process tree (template masters, workers, sandboxes) from ``/proc``: unique memory (USS,
``smaps_rollup``) and CPU. Runs ``--episodes`` G=4 x K=8 HumanEval vector-env episodes
(every reward checked), then forks ``--sessions`` idle sessions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _local_node
import _proc
import httpx

from collimate_rl.bench import grpo
from collimate_rl.wire import CollimateClient
from collimate_rl.wire.node_metrics import NodeSnapshot


def tree_uss_mib(pid: int) -> float:
    total = 0
    for p in _proc.tree(pid):
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    proc, sock = _local_node.start("sizing-")
    client = CollimateClient(unix_socket=sock)
    http = httpx.Client(transport=httpx.HTTPTransport(uds=sock))

    def scrape() -> NodeSnapshot:
        return NodeSnapshot.from_text(http.get("http://localhost/metrics").text)

    try:
        _local_node.wait_ready(client, proc)
        idle = scrape()
        print(
            f"idle: node process RSS {idle.rss_bytes / 2**20:.0f} MiB, "
            f"tree USS {tree_uss_mib(proc.pid):.0f} MiB, {len(_proc.tree(proc.pid))} processes"
        )
        envs = grpo.open_vector_env(client, "humaneval", 4, 8)
        try:
            grpo.run_episodes(envs, 1, warmup=False)  # warm up
            before, tree0 = scrape(), _proc.tree_cpu_ms(proc.pid)
            run = grpo.run_episodes(envs, args.episodes, warmup=False, first=1)
            after, tree1 = scrape(), _proc.tree_cpu_ms(proc.pid)
        finally:
            envs.close()
        assert run.rewards == [float(r.should_pass) for r in run.rollouts]
        n = len(run.rollouts)
        print(f"{n} HumanEval rollouts (G=4 x K=8) at {n / run.step_seconds:.1f} rollouts/s (step)")
        print(
            f"  CPU per rollout: node process {1e3 * (after.cpu_seconds - before.cpu_seconds) / n:.2f} ms, "
            f"node tree {(tree1 - tree0) / n:.2f} ms (client not counted)"
        )
        print(
            f"  after: node process RSS {after.rss_bytes / 2**20:.0f} MiB, "
            f"tree USS {tree_uss_mib(proc.pid):.0f} MiB"
        )
        parent = client.create_session("python3").session_id
        made = 1
        while made < args.sessions:
            count = min(256, args.sessions - made)
            client.fork_session(parent, count)
            made += count
        many = scrape()
        print(
            f"{made} live sessions: node process RSS {many.rss_bytes / 2**20:.0f} MiB, "
            f"tree USS {tree_uss_mib(proc.pid):.0f} MiB, {len(_proc.tree(proc.pid))} processes "
            f"(/metrics says {many.sessions:.0f} sessions)"
        )
    finally:
        http.close()
        client.close()
        _local_node.stop(proc, sock)


if __name__ == "__main__":
    main()
