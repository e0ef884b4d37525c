"""Interrupted blob downloads: resumed with Range, restarted where Range is ignored."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from collimate_rl.node.images.errors import RegistryError
from collimate_rl.node.images.pull import pull_image
from tests.node.images._images import Image, Layer, write_layout
from tests.node.images._registry import Registry, free_port, skopeo_push
from tests.node.images.conftest import Registries

_PASS_HEADERS = (
    "content-type",
    "content-length",
    "content-range",
    "docker-content-digest",
    "www-authenticate",
    "accept-ranges",
)


class CuttingProxy:
    """Forwards GETs to a registry; cuts chosen blob downloads after ``cut_at`` bytes.

    Args:
        cuts: how many downloads of the target blob to cut (from the first).
        honour_range: forward the client's Range header (else drop it: a registry
            that ignores Range answers 200 with everything).
    """

    def __init__(
        self, upstream: Registry, target: str, cut_at: int, cuts: int, honour_range: bool = True
    ) -> None:
        self.upstream, self.target, self.cut_at = upstream, target, cut_at
        self.cuts_left, self.honour_range = cuts, honour_range
        self.ranges: list[str | None] = []
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._forward(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        headers = {
            k: v for k, v in handler.headers.items() if k.lower() in ("accept", "authorization")
        }
        is_target = handler.path.endswith(f"/blobs/{self.target}")
        if is_target:
            self.ranges.append(handler.headers.get("Range"))
        if handler.headers.get("Range") and (self.honour_range or not is_target):
            headers["Range"] = handler.headers["Range"]
        upstream = httpx.get(f"http://{self.upstream.host}{handler.path}", headers=headers)
        body = upstream.content
        handler.send_response(upstream.status_code)
        for key, value in upstream.headers.items():
            if key.lower() in _PASS_HEADERS:
                handler.send_header(key, value)
        handler.end_headers()
        if is_target and self.cuts_left > 0:
            self.cuts_left -= 1
            handler.wfile.write(body[: self.cut_at])
            handler.wfile.flush()
            handler.close_connection = True
            return
        handler.wfile.write(body)


@pytest.fixture(scope="module")
def big(registries: Registries, tmp_path_factory: pytest.TempPathFactory) -> Image:
    image = Image([Layer({"data.bin": os.urandom(300_000)}, "tar")])
    layout = write_layout(tmp_path_factory.mktemp("big") / "layout", {"t": image})
    skopeo_push(f"oci:{layout}:t", registries.anonymous, "reg/big:v1")
    return image


@pytest.fixture
def proxy_factory(registries: Registries, big: Image) -> Iterator[Any]:
    made: list[CuttingProxy] = []

    def make(**kwargs: Any) -> CuttingProxy:
        made.append(CuttingProxy(registries.anonymous, big.layers[0].digest, **kwargs))
        return made[-1]

    yield make
    for proxy in made:
        proxy.close()


def test_a_cut_download_resumes_with_a_range_request(
    proxy_factory: Any, big: Image, store: Any
) -> None:
    proxy = proxy_factory(cut_at=100_000, cuts=1)
    result = pull_image(f"{proxy.host}/reg/big:v1", store)
    size = len(big.layers[0].blob)
    assert proxy.ranges == [None, "bytes=100000-"]
    assert result.bytes_fetched == size + len(big.manifest) + len(big.config)
    assert store.blob_path(big.layers[0].digest).read_bytes() == big.layers[0].blob


def test_a_registry_that_ignores_range_gets_a_restart(
    proxy_factory: Any, big: Image, store: Any
) -> None:
    proxy = proxy_factory(cut_at=100_000, cuts=1, honour_range=False)
    result = pull_image(f"{proxy.host}/reg/big:v1", store)
    size = len(big.layers[0].blob)
    assert proxy.ranges == [None, "bytes=100000-"]
    # the first 100000 bytes were thrown away and fetched again
    assert result.bytes_fetched == 100_000 + size + len(big.manifest) + len(big.config)
    assert store.blob_path(big.layers[0].digest).read_bytes() == big.layers[0].blob


def test_a_download_that_keeps_failing_stops_and_keeps_the_partial(
    proxy_factory: Any, big: Image, store: Any
) -> None:
    proxy = proxy_factory(cut_at=0, cuts=100)
    with pytest.raises(RegistryError, match="pull again to resume"):
        pull_image(f"{proxy.host}/reg/big:v1", store)
    assert not store.has_blob(big.layers[0].digest)


def test_a_pull_resumes_what_an_earlier_process_left(
    registries: Registries, proxy_factory: Any, big: Image, store: Any
) -> None:
    layer = big.layers[0]
    handle, _ = store.open_partial(layer.digest)
    with handle:
        handle.write(layer.blob[:123_456])
    proxy = proxy_factory(cut_at=0, cuts=0)
    result = pull_image(f"{proxy.host}/reg/big:v1", store)
    assert proxy.ranges == ["bytes=123456-"]
    assert result.bytes_fetched == len(layer.blob) - 123_456 + len(big.manifest) + len(big.config)
    assert store.blob_path(layer.digest).read_bytes() == layer.blob


def test_an_overlong_partial_is_dropped_and_fetched_again(
    registries: Registries, proxy_factory: Any, big: Image, store: Any, tmp_path: Path
) -> None:
    layer = big.layers[0]
    handle, _ = store.open_partial(layer.digest)
    with handle:
        handle.write(layer.blob + b"junk")
    proxy = proxy_factory(cut_at=0, cuts=0)
    pull_image(f"{proxy.host}/reg/big:v1", store)
    assert proxy.ranges == [None]
    assert store.blob_path(layer.digest).read_bytes() == layer.blob
