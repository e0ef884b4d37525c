"""Fixtures: real nodes over real HTTP (uvicorn in a thread), TCP and unix socket.

The runtime is the REAL one (``collimate_rl.node.runtime.create_runtime``)
when it is importable and starts; otherwise the unisolated fake in
``fakes.py``. ``COLLIMATE_TEST_RUNTIME=fake`` forces the fake,
``=none``/``=bwrap`` picks the real driver.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from collimate_rl.node.app import create_app
from collimate_rl.node.core import Node, NodeConfig
from collimate_rl.node.runtime.base import Runtime
from collimate_rl.node.server import NodeServer, bind_tcp_socket, bind_unix_socket

from .fakes import FakeRuntime

RuntimeFactory = Callable[..., Runtime]


@functools.cache
def _pick_runtime() -> tuple[RuntimeFactory, str]:
    wanted = os.environ.get("COLLIMATE_TEST_RUNTIME", "auto")
    if wanted != "fake":
        create_runtime: Callable[..., Runtime] | None
        try:
            from collimate_rl.node.runtime import create_runtime
        except ImportError:
            create_runtime = None
        if create_runtime is not None:
            isolation = None if wanted in ("auto", "real") else wanted
            factory = functools.partial(create_runtime, isolation)

            async def probe() -> None:
                with tempfile.TemporaryDirectory() as tmp:
                    rt = factory(state_dir=Path(tmp) / "state")
                    try:
                        await rt.start()
                    finally:
                        await rt.close()

            try:
                asyncio.run(asyncio.wait_for(probe(), 60))
            except Exception as exc:
                if wanted != "auto":
                    raise
                print(f"real runtime unusable ({exc!r}); using the fake")
            else:
                return factory, f"real:{isolation or 'auto'}"
    return (lambda *a, **kw: FakeRuntime(*a, **kw)), "fake"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def runtime_kind() -> str:
    return _pick_runtime()[1]


def make_runtime(state_dir: Path, **kwargs: Any) -> Runtime:
    factory, _ = _pick_runtime()
    return factory(state_dir=state_dir, **kwargs)


def python_template(templates: list[str]) -> str:
    return "python3" if "python3" in templates else templates[0]


class ThreadedNode:
    """A node served by uvicorn in a background thread, on TCP or a unix socket."""

    def __init__(
        self,
        tmp: Path,
        config: NodeConfig,
        *,
        uds: bool,
        runtime: Runtime | None = None,
        token: str | None = None,
    ):
        self.tmp = tmp
        self.state_dir = tmp / "state"
        self.runtime = runtime or make_runtime(self.state_dir)
        self.app = create_app(self.runtime, config, token=token)
        self.node: Node = self.app.state.node
        self.uds_path = tmp / "node.sock" if uds else None
        self.sock = bind_unix_socket(self.uds_path) if self.uds_path else bind_tcp_socket()
        host, port = ("localhost", 0) if uds else self.sock.getsockname()[:2]
        self.base_url = f"http://{host}:{port}" if not uds else "http://localhost"
        self.server = NodeServer(
            uvicorn.Config(
                self.app, lifespan="on", log_level="warning", timeout_graceful_shutdown=5
            ),
            self.node,
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self) -> ThreadedNode:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("node thread failed to start")
            time.sleep(0.01)
        return self

    def client(self, timeout: float = 60.0) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.uds_path)) if self.uds_path else None
        return httpx.Client(base_url=self.base_url, transport=transport, timeout=timeout)

    def async_client(self, timeout: float = 60.0) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=str(self.uds_path)) if self.uds_path else None
        return httpx.AsyncClient(base_url=self.base_url, transport=transport, timeout=timeout)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()
        if self.uds_path is not None and self.uds_path.exists():
            self.uds_path.unlink()


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[Callable[..., ThreadedNode]]:
    nodes: list[ThreadedNode] = []

    def make(*, uds: bool = False, token: str | None = None, **config: Any) -> ThreadedNode:
        sub = Path(tempfile.mkdtemp(dir=tmp_path))
        node = ThreadedNode(sub, NodeConfig(**config), uds=uds, token=token).start()
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.stop()


@pytest.fixture(scope="module", params=["tcp", "uds"])
def shared_node(request: pytest.FixtureRequest) -> Iterator[ThreadedNode]:
    """One node per transport, shared by a module's contract tests."""
    tmp = Path(tempfile.mkdtemp(prefix="node-test-"))
    node = ThreadedNode(
        tmp, NodeConfig(max_inflight=8, queue=32, pool_size=2), uds=request.param == "uds"
    ).start()
    yield node
    node.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def http(shared_node: ThreadedNode) -> Iterator[httpx.Client]:
    with shared_node.client() as client:
        yield client


@pytest.fixture
def template(shared_node: ThreadedNode) -> str:
    return python_template(shared_node.runtime.templates())


def pytest_report_header(config: pytest.Config) -> str:
    return f"collimate node tests: runtime = {_pick_runtime()[1]}"
