"""Template services: session bring-up and the bridge's cost, side by side in one run.

Measures on one local node (bwrap):

* create + delete of a plain ``python3`` session vs a session that starts a
  service (``python3 -m http.server``, waiting for ``GET /``);
* one small HTTP GET through a service's endpoint (node loopback -> unix relay
  -> the session's loopback) vs the same GET to the same server run directly
  on the host (the floor);
* bulk throughput: one GET of a 64 MiB file, through the bridge vs direct.

Run:  .venv/bin/python benchmarks/bench_services.py [--n 30]
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collimate_rl.bench.stats import Summary, latencies_ms
from collimate_rl.node import LocalNode

BIG = 64 << 20
SERVER = "exec python3 -m http.server 8000 --bind 127.0.0.1"


def _summary(latencies: list[float]) -> tuple[str, str, str]:
    s = Summary.of(latencies)
    return f"{s.p50:.2f}", f"{s.p99:.2f}", f"{s.mean:.2f}"


def _get(address: str, path: str) -> int:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return len(reply.read())
    finally:
        conn.close()


def _wait(address: str) -> None:
    host, port = address.rsplit(":", 1)
    for _ in range(500):
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {address}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=30, help="samples per latency row")
    args = parser.parse_args(argv)
    with LocalNode(pool_size=0) as node, tempfile.TemporaryDirectory() as tmp:
        client = node.client()
        client.bake_template("svc-files", [f"head -c {BIG} /dev/zero > big.bin"])
        ready = {"cmd": SERVER, "ports": [8000], "http": "/"}
        client.bake_template("svc-web", [], base="svc-files", ready=ready)

        def plain() -> None:
            client.delete_session(client.create_session("python3").session_id)

        def service() -> None:
            client.delete_session(client.create_session("svc-web").session_id)

        rows = [
            ("create + delete, plain session", *_summary(latencies_ms(plain, args.n))),
            ("create + delete, service session", *_summary(latencies_ms(service, args.n))),
        ]

        Path(tmp, "big.bin").write_bytes(b"\0" * BIG)
        port = 18000 + os.getpid() % 1000
        direct = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        created = client.create_session("svc-web")
        try:
            _wait(f"127.0.0.1:{port}")
            bridged, host = created.endpoints["8000"], f"127.0.0.1:{port}"
            for name, address in (("through the bridge", bridged), ("direct on the host", host)):
                lat = latencies_ms(lambda a=address: _get(a, "/"), args.n)
                rows.append((f"GET / {name}", *_summary(lat)))
            for name, address in (("through the bridge", bridged), ("direct on the host", host)):
                t0 = time.perf_counter()
                assert _get(address, "/big.bin") == BIG
                mib_s = BIG / (1 << 20) / (time.perf_counter() - t0)
                rows.append((f"GET 64 MiB {name}", f"{mib_s:.0f} MiB/s", "", ""))
        finally:
            client.delete_session(created.session_id)
            direct.kill()
            direct.wait()
        client.close()
    print(f"{'operation':<40} {'p50 ms':>12} {'p99 ms':>8} {'mean ms':>8}")
    for name, *cells in rows:
        print(f"{name:<40} {cells[0]:>12} {cells[1]:>8} {cells[2]:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
