"""What ``/metrics`` and request ids cost: the vector env's HumanEval step on two nodes in turns.

    git -C <checkout> archive <commit before the metrics> | tar -x -C /tmp/collimate-base
    cd /tmp && <venv>/bin/python <checkout>/benchmarks/bench_observability.py \\
        --base /tmp/collimate-base [--groups 4] [--size 8] [--episodes 40] [--scrape 1.0]

Two nodes run side by side: one from ``--base`` (a source tree without the metrics and the
request ids: ``PYTHONPATH``), one from this checkout, which a thread scrapes every
``--scrape`` seconds as Prometheus would (0: never). One client (this checkout's) drives a
G x K HumanEval vector env on each; the two envs take turns, episode by episode, so the
machine's drift falls on both alike. Prints each node's median step rate (rollouts/s) and
the median, over turns, of this checkout's rate against the base's in the same turn, with
its quartiles: the ratio and its spread. On a shared machine the rates swing with the
neighbours; CPU time does much less, so it also prints the CPU per rollout of each node's
process tree and of the client (this process), and the median, over turns, of the whole
step's CPU with metrics against without: on CPU-bound nodes that is the throughput cost.
``--control`` runs the base on both nodes (an A/A run): the spread noise alone gives, and
any bias of the second node started (the ``metrics`` one); ``--swap`` starts the metrics
node first, so the geometric mean of a run and a swapped run's ratios cancels that bias.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

import _local_node
import _proc
import httpx

from collimate_rl.bench import grpo
from collimate_rl.wire import CollimateClient


def _scraper(sock: str, every: float, stop: threading.Event) -> int:
    scrapes = 0
    with httpx.Client(transport=httpx.HTTPTransport(uds=sock)) as http:
        while not stop.wait(every):
            http.get("http://localhost/metrics").raise_for_status()
            scrapes += 1
    return scrapes


def micro_costs(per_request: int) -> dict[str, float]:
    """Microseconds of this process's CPU for each piece of the instrumentation, measured
    in-process (best of 5 timings): the request-id middleware per request, the exec's
    tally and the grade check per exec, a scrape's render."""
    import asyncio
    import timeit

    from collimate_rl.node.metrics import ExecTally, NodeMetrics
    from collimate_rl.node.request_ids import RequestIdMiddleware
    from collimate_rl.node.runtime._warm import warm_stub_for
    from collimate_rl.node.runtime.base import ExecSpec
    from collimate_rl.node.runtime.workers import grade_of

    metrics = NodeMetrics()
    path = "/tmp/colgrade_0123456789abcdef.json"
    spec = ExecSpec(code=warm_stub_for(path), files=((path, b"{}" * 200),), seed="ab" * 32)

    def tally() -> None:
        with ExecTally(metrics, "session", grade=grade_of(spec) is not None) as t:
            t.ran(0, False)

    async def app(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    async def sink(message: object) -> None:
        pass

    wrapped = RequestIdMiddleware(app, metrics)
    scope = {"type": "http", "method": "POST", "path": "/v1/exec/batch", "headers": []}
    loop = asyncio.new_event_loop()

    def through(handler: object, n: int) -> None:
        async def many() -> None:
            for _ in range(n):
                await handler(scope, None, sink)  # type: ignore[operator]

        loop.run_until_complete(many())

    def best(fn: object, number: int) -> float:
        return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]

    try:
        middleware = (
            best(lambda: through(wrapped, 1000), 1) / 1000
            - best(lambda: through(app, 1000), 1) / 1000
        )
    finally:
        loop.close()
    for _ in range(50):
        metrics.request("POST /v1/exec/batch", 200)
    return {
        "middleware per request": middleware,
        "tally + grade check per exec": best(tally, 2000),
        "render per scrape": best(metrics.render, 50),
        "items per request": float(per_request),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the base source tree")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--scrape", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument("--control", action="store_true", help="the base on both nodes (A/A)")
    parser.add_argument("--swap", action="store_true", help="start the metrics node first")
    args = parser.parse_args()
    base_env = {**os.environ, "PYTHONPATH": str(args.base.resolve())}
    starts = {
        "base": lambda: _local_node.start("obs-base-", env=base_env),
        "metrics": lambda: _local_node.start(
            "obs-metrics-", env=base_env if args.control else None
        ),
    }
    first = ["metrics", "base"] if args.swap else ["base", "metrics"]
    started = {name: starts[name]() for name in first}
    nodes = {name: started[name] for name in ("base", "metrics")}
    clients = {name: CollimateClient(unix_socket=sock) for name, (_, sock) in nodes.items()}
    stop = threading.Event()
    scrapes: list[int] = []
    try:
        for name, (proc, _) in nodes.items():
            _local_node.wait_ready(clients[name], proc)
        with httpx.Client(transport=httpx.HTTPTransport(uds=nodes["base"][1])) as http:
            assert http.get("http://localhost/metrics").status_code == 404, "--base has metrics"
        if args.scrape > 0 and not args.control:
            thread = threading.Thread(
                target=lambda: scrapes.append(_scraper(nodes["metrics"][1], args.scrape, stop))
            )
            thread.start()
        envs = {
            name: grpo.open_vector_env(client, "humaneval", args.groups, args.size)
            for name, client in clients.items()
        }
        rates: dict[str, list[float]] = {name: [] for name in envs}
        node_cpu: dict[str, list[float]] = {name: [] for name in envs}  # ms per rollout
        client_cpu: dict[str, list[float]] = {name: [] for name in envs}
        own_cpu: dict[str, list[float]] = {name: [] for name in envs}  # the node process alone
        try:
            for episode in range(args.episodes + 1):
                order = list(envs) if episode % 2 else list(reversed(envs))  # who goes first
                for name in order:
                    pid = nodes[name][0].pid
                    node0, tree0, own0 = (
                        _proc.usage(pid)[0],
                        _proc.tree_cpu_ms(pid),
                        time.process_time(),
                    )
                    run = grpo.run_episodes(envs[name], 1, warmup=False, first=episode)
                    node1, tree1, own1 = (
                        _proc.usage(pid)[0],
                        _proc.tree_cpu_ms(pid),
                        time.process_time(),
                    )
                    assert run.rewards == [float(r.should_pass) for r in run.rollouts], name
                    if episode:  # the first turn warms both up
                        n = len(run.rollouts)
                        rates[name].append(n / run.step_seconds)
                        node_cpu[name].append((tree1 - tree0) / n)
                        client_cpu[name].append((own1 - own0) * 1e3 / n)
                        own_cpu[name].append((node1 - node0) / n)
        finally:
            for env in envs.values():
                env.close()
    finally:
        stop.set()
        for client in clients.values():
            client.close()
        for proc, sock in nodes.values():
            _local_node.stop(proc, sock)
    ratios = [m / b for m, b in zip(rates["metrics"], rates["base"], strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    which = "A/A control: base on both nodes" if args.control else "base vs metrics"
    which += ", the metrics node started first" if args.swap else ""
    print(
        f"HumanEval vector env step, G={args.groups} x K={args.size}, {args.episodes} turns, {which}"
    )
    for name in envs:
        print(
            f"  {name:8s} median {statistics.median(rates[name]):7.1f} rollouts/s, CPU per "
            f"rollout (all turns): node tree {statistics.fmean(node_cpu[name]):.2f} ms (the "
            f"node process {statistics.fmean(own_cpu[name]):.3f}), "
            f"client {statistics.fmean(client_cpu[name]):.2f} ms"
        )
    print(f"  rate metrics/base, per turn: median {median:.3f} (quartiles {q1:.3f} .. {q3:.3f})")
    total = {n: [a + b for a, b in zip(node_cpu[n], client_cpu[n], strict=True)] for n in envs}
    # /proc counts CPU in clock ticks (10 ms): one turn's figure is coarse, all turns' is not
    cpu = statistics.fmean(total["metrics"]) / statistics.fmean(total["base"])
    print(f"  step CPU (node tree + client) metrics/base, all turns: {cpu:.3f}")
    if scrapes:
        print(f"  the metrics node was scraped {scrapes[0]} times (every {args.scrape:g} s)")
    costs = micro_costs(args.groups * args.size)
    per_rollout = costs["tally + grade check per exec"] + costs["middleware per request"] / (
        args.groups * args.size
    )
    scrape_share = costs["render per scrape"] / (args.scrape or float("inf"))  # us per second
    rate = statistics.median(rates["metrics"])
    per_rollout += scrape_share / rate
    base_cpu = statistics.fmean(total["base"]) * 1e3  # us per rollout
    print(
        "  in-process costs (us, best of 5): "
        + ", ".join(f"{k} {v:.1f}" for k, v in costs.items() if k != "items per request")
    )
    print(
        f"  so per rollout ~{per_rollout:.1f} us of CPU: {100 * per_rollout / base_cpu:.2f}% of "
        f"the step's {base_cpu / 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
