"""The daemon client's CPU per request, this checkout's ``wire/_http11.py`` against another's.

    .venv/bin/python benchmarks/http_client.py --against <checkout> [--requests 2000] [--rounds 3]

Loads ``collimate_rl/wire/_http11.py`` from both checkouts and times, in turns, the thread CPU
of ``NodeHTTP.request`` for a 32-item ``POST /v1/exec/batch`` body (a GRPO step's shape)
against a thread of this process that answers each with a 32-result body over loopback TCP.
The server's work is in another thread and not counted. Round 22 in ``history.md`` is this
script's output for h11 against the hand-written parser before it.
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import threading
import time
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent.parent
BODY = b'{"results": [' + b'{"exit_code": 0, "stdout": "ok"},' * 31 + b'{"exit_code": 0}]}'
REPLY = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(
    BODY
)
REQUEST = b'{"items": [' + b'{"session_id": "s", "code": "x"},' * 31 + b'{"code": "y"}]}'


def load(checkout: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, checkout / "collimate_rl" / "wire" / "_http11.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answer(conn: socket.socket) -> None:
    buffer = b""
    with conn:
        while data := conn.recv(65536):
            buffer += data
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                if len(rest) < length:
                    break
                buffer = rest[length:]
                conn.sendall(REPLY + BODY)


def serve() -> str:
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=_answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}"


def cpu_per_request_us(module: ModuleType, url: str, requests: int) -> float:
    http = module.NodeHTTP(url, unix_socket=None, headers={"User-Agent": "bench"})
    for _ in range(50):  # warm: the connection, the code paths
        http.request("POST", "/v1/exec/batch", content=REQUEST, params=None, timeout=5)
    start = time.thread_time()
    for _ in range(requests):
        http.request("POST", "/v1/exec/batch", content=REQUEST, params=None, timeout=5)
    used = time.thread_time() - start
    http.close()
    return used / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ours, theirs = load(HERE, "http11_here"), load(args.against.resolve(), "http11_there")
    url = serve()
    for turn in range(1, args.rounds + 1):
        there = cpu_per_request_us(theirs, url, args.requests)
        here = cpu_per_request_us(ours, url, args.requests)
        print(f"round {turn}: --against {there:.0f} us, this checkout {here:.0f} us per request")


if __name__ == "__main__":
    main()
