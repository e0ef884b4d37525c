"""Egress: what a networked session and its proxy cost, side by side in one run.

Measures on one local node (bwrap, warm pool off so every create is a real fork):

* create + delete of a ``python3`` session vs a ``python3-net`` one (its egress
  relay R, its gate on the node);
* one small HTTP GET from inside a networked session, through its relay and the
  node's gate (a new connection each: the proxy closes after one request), vs
  the same GET from the host straight to the server (the floor);
* bulk throughput: one GET of a 64 MiB file, through the proxy vs direct.

The server is a stand-in internet host on ``127.0.0.2`` (the node is told to
treat it as public); nothing leaves the machine.

Run:  .venv/bin/python benchmarks/bench_egress.py [--n 30]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collimate_rl.node import LocalNode

BIG = 64 << 20

GETS_INSIDE = """
import http.client, json, sys, time
host, port, n, path = sys.argv[1:] if len(sys.argv) > 1 else ARGS
times = []
for _ in range(int(n)):
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=60)
    conn.request("GET", f"http://{host}:{port}{path}")
    size = len(conn.getresponse().read())
    conn.close()
    times.append((time.perf_counter() - start) * 1000)
print(json.dumps({"ms": times, "bytes": size}))
"""


def _gets_host(port: int, n: int, path: str) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(n):
        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.2", port, timeout=60)
        conn.request("GET", path)
        size = len(conn.getresponse().read())
        conn.close()
        times.append((time.perf_counter() - start) * 1000)
    return times, size


def _row(name: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"| {name} | {statistics.median(ms):.2f} | {p90:.2f} | {len(ms)} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=30, help="repetitions of each latency")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "small").write_bytes(b"x" * 1024)
        (Path(root) / "big").write_bytes(b"\0" * BIG)
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.2", "-d", root],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().split("port ")[1].split()[0])
            flags = (
                "--egress-resolve-only",
                "--egress-resolve",
                "bench.test=127.0.0.2",
                "--egress-internet",
                "127.0.0.2/32",
            )
            with LocalNode(pool_size=0, extra_args=flags) as node:
                client = node.client()
                creates: dict[str, list[float]] = {"python3": [], "python3-net": []}
                for i in range(args.n + 1):  # interleaved; the first round warms up
                    for template in creates:
                        start = time.perf_counter()
                        sid = client.create_session(template).session_id
                        client.delete_session(sid)
                        if i:
                            creates[template].append((time.perf_counter() - start) * 1000)
                sid = client.create_session("python3-net").session_id
                try:

                    def inside(path: str, n: int) -> list[float]:
                        code = f"ARGS = {['bench.test', str(port), str(n), path]!r}\n" + GETS_INSIDE
                        out = client.session_exec(sid, code=code, timeout_seconds=600).stdout
                        return list(json.loads(out.strip().splitlines()[-1])["ms"])

                    inside("/small", 3)
                    proxied = inside("/small", args.n)
                    direct, _ = _gets_host(port, args.n, "/small")
                    big_proxied = inside("/big", 3)
                    big_direct, _ = _gets_host(port, 3, "/big")
                finally:
                    client.delete_session(sid)
        finally:
            server.kill()
            server.wait()
    print("| measurement | median ms | p90 ms | n |")
    print("|---|---|---|---|")
    for template, ms in creates.items():
        print(_row(f"create + delete `{template}`", ms))
    print(_row("GET 1 KiB, inside python3-net through the proxy", proxied))
    print(_row("GET 1 KiB, host direct (floor)", direct))
    mib = BIG / (1 << 20)
    through = mib / (statistics.median(big_proxied) / 1000)
    floor = mib / (statistics.median(big_direct) / 1000)
    print()
    print(f"64 MiB GET: through the proxy {through:.0f} MiB/s, direct {floor:.0f} MiB/s")
    net, plain = statistics.median(creates["python3-net"]), statistics.median(creates["python3"])
    print(
        f"ratios: create net/plain {net / plain:.2f}x; small GET proxy/direct "
        f"{statistics.median(proxied) / statistics.median(direct):.2f}x; bulk direct/proxy "
        f"{floor / through:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
