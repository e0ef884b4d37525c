"""The whole node (app, admission, registry, runtime) served over a unix socket or TCP, in the
test's own event loop, with the runtime tests' session interface on top of HTTP.

The escape battery attacks sandboxes through :class:`ServedNode` so that every
attack runs with a real node listening next to it, once per transport: on TCP
a sandbox must not reach the node's port, on a unix socket not its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from collimate_rl.node.app import create_app
from collimate_rl.node.core import NodeConfig
from collimate_rl.node.runtime import ExecOutcome, ExecSpec, Limits, create_runtime
from collimate_rl.node.server import bind_tcp_socket, bind_unix_socket

TRANSPORTS = ("unix", "tcp")


class _InLoopServer(uvicorn.Server):
    """uvicorn in the test's event loop, leaving the process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class NodeSession:
    """A node session driven over HTTP, shaped like the runtime's ``LocalSession``."""

    def __init__(self, node: ServedNode, session_id: str) -> None:
        self.node = node
        self.session_id = session_id

    async def exec(self, spec: ExecSpec) -> ExecOutcome:
        body: dict[str, Any] = {"timeout_seconds": int(spec.timeout_seconds), "seed": spec.seed}
        if spec.command is not None:
            body["command"] = spec.command
        elif spec.commands is not None:
            body["commands"] = [list(argv) for argv in spec.commands]
        else:
            body["code"] = spec.code or ""
        if spec.files:
            body["files"] = [{"path": p, "content": d.decode()} for p, d in spec.files]
        resp = await self.node.http.post(
            f"/v1/sessions/{self.session_id}/exec", json=body, timeout=spec.timeout_seconds + 60
        )
        assert resp.status_code == 200, resp.text
        out = resp.json()
        output = out["stdout"].encode()
        return ExecOutcome(
            exit_code=out["exit_code"],
            output=output,
            exec_time_ms=out["exec_time_ms"],
            # the wire has no flag: a timeout is exit -1 and the runtime's message
            timed_out=out["exit_code"] == -1 and b"timeout after" in output[-64:],
            truncated=bool(out.get("truncated")),
            seed_ack=out["seed_ack"],
        )

    async def close(self) -> None:
        await self.node.http.delete(f"/v1/sessions/{self.session_id}")


class ServedNode:
    """A node on a fresh bwrap runtime, served on ``transport`` (``"unix"`` or ``"tcp"``)."""

    def __init__(
        self, transport: str, limits: Limits, sandbox_uid: int, config: NodeConfig | None = None
    ) -> None:
        self.transport = transport
        self._tmp = tempfile.TemporaryDirectory(prefix="escape-node-")
        tmp = Path(self._tmp.name)
        runtime = create_runtime(
            "bwrap", state_dir=tmp / "state", limits=limits, sandbox_uid=sandbox_uid
        )
        self.runtime = runtime
        self.app = create_app(runtime, config or NodeConfig(pool_size=1, max_inflight=8))
        if transport == "unix":
            self.socket_path: Path | None = tmp / "node.sock"
            self.sock = bind_unix_socket(self.socket_path)
            self.port = 0
            self.http = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=str(self.socket_path)),
                base_url="http://localhost",
            )
        else:
            self.socket_path = None
            self.sock = bind_tcp_socket("127.0.0.1", 0)
            self.port = int(self.sock.getsockname()[1])
            self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}")
        config = uvicorn.Config(self.app, lifespan="on", log_level="warning")
        self.server = _InLoopServer(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> ServedNode:
        self._task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            assert not self._task.done(), "the node did not start"
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        await self.http.aclose()
        self.server.should_exit = True
        if self._task is not None:
            await self._task
        self.sock.close()
        self._tmp.cleanup()

    async def create_session(self, template_id: str, name: str = "") -> NodeSession:
        """A new session (``name`` is ignored: the node picks the ids)."""
        resp = await self.http.post("/v1/sessions", json={"template_id": template_id})
        assert resp.status_code == 201, resp.text
        return NodeSession(self, resp.json()["session_id"])


def host_addresses() -> list[str]:
    """This host's own IP addresses (best effort), loopback included."""
    found = {"127.0.0.1", "::1"}
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]))
    return sorted(found)


#: The image template the escape battery also attacks from (``add_image_template``).
IMAGE_TEMPLATE = "image"


async def add_image_template(node: ServedNode) -> None:
    """Give ``node`` the template ``image``: a Debian bookworm root filesystem with python3,
    ``WorkingDir`` ``/sandbox`` (once per node; skips where the root filesystem cannot be had)."""
    from collimate_rl.node.runtime import ImageRoot, TemplateSpec
    from tests.node.images._rootfs import rootfs_layer

    if IMAGE_TEMPLATE in node.runtime.templates():
        return
    layer = rootfs_layer("bookworm-py")
    env = (("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),)
    image = ImageRoot(layers=(layer,), env=env, working_dir="/sandbox", ref="bookworm-py")
    await node.runtime.add_template(TemplateSpec(IMAGE_TEMPLATE, image=image))
