"""An env-server image: its ``Cmd`` is the service of ``Ready(ports=..., http=...)``, and
OpenEnv's ``from_docker_image(REF, provider=CollimateProvider(client))`` runs it on our node.

The image is built here: Debian bookworm with python3, plus a layer with a small
OpenEnv-protocol server in the standard library (``_env_server.py``), ``Cmd``
``["python3", "/srv/env/server.py"]``, ``WorkingDir`` ``/srv/env``.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from collimate_rl.node import LocalNode

from ._env_server import SOURCE
from ._rootfs import rootfs_layout, tar_layer

pytestmark = [pytest.mark.bwrap]

CONFIG = {
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "ENV_NAME=echo"],
    "WorkingDir": "/srv/env",
    "Cmd": ["python3", "/srv/env/server.py", "8000"],
    "ExposedPorts": {"8000/tcp": {}},
}


@pytest.fixture(scope="module")
def node(require_bwrap: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    store = tmp_path_factory.mktemp("svc-store")
    with LocalNode(image_store=store, pool_size=0) as local:
        yield local


@pytest.fixture(scope="module")
def image_ref(tmp_path_factory: pytest.TempPathFactory) -> str:
    layer = tar_layer({"srv/env/server.py": SOURCE.encode()})
    root = tmp_path_factory.mktemp("svc-layout") / "env-server"
    return f"oci:{rootfs_layout('bookworm-py', root, config=CONFIG, extra_layers=(layer,))}:v1"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_the_images_cmd_is_the_ready_service(node: Any, image_ref: str) -> None:
    client = node.client()
    ready = {"ports": [8000], "http": "/health", "http_timeout_s": 60}
    client.bake_template("env-server", [], image=image_ref, ready=ready)
    made = client.create_session("env-server")
    sid = made["session_id"]
    try:
        endpoint = made["endpoints"]["8000"]
        assert _get(f"http://{endpoint}/health") == {"status": "healthy"}
        out = client.session_exec(sid, command="cat /proc/*/cmdline | tr '\\0' ' '; echo; pwd")
        assert "python3 /srv/env/server.py 8000" in out["stdout"], out
        assert out["stdout"].rstrip().endswith("/srv/env")
    finally:
        client.delete_session(sid)


def test_from_docker_image_runs_an_env_server_image(node: Any, image_ref: str) -> None:
    pytest.importorskip("openenv.core")
    from openenv.core import GenericEnvClient

    from collimate_rl.openenv import CollimateProvider

    client = node.client()
    provider = CollimateProvider(client, ready_timeout=60)

    async def episode() -> tuple[Any, Any]:
        env = await GenericEnvClient.from_docker_image(image_ref, provider=provider)
        try:
            first = await env.reset()
            second = await env.step({"text": "hello"})
        finally:
            await env.close()
        return first, second

    first, second = asyncio.run(episode())
    assert first.observation == {"echoed": "ready", "python": "3.11.2"}
    assert second.observation == {"echoed": "hello"} and second.reward == 5.0
    assert provider.session_id is None
    assert client.list_sessions() == []
