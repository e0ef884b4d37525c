"""The node's image surface over HTTP: ``POST /v1/templates`` with an image pulls it into
the node's image store and registers an image template; ``GET /v1/images`` lists the
store; ``POST /v1/images/prune`` removes what no template uses; errors are typed.

Real OCI image layouts (a Debian root filesystem as the first layer, small layers of our
own above it), a real store, a real node on TCP (``_served.py``).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node.core import NodeConfig
from collimate_rl.node.image_templates import ImageSettings

from ..runtime._served import NodeSession, ServedNode
from ..runtime.conftest import TEST_LIMITS, run
from ._images import Image, Layer, write_layout
from ._rootfs import rootfs_layout, tar_layer
from .conftest import IMAGE_SANDBOX_UID

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap]

APP_CONFIG = {
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=hello from the image"],
    "WorkingDir": "/app",
    "Cmd": ["python3", "-m", "http.server", "8000"],
}


#: the node's image store (set by the fixture)
STORE: list[Path] = []


@pytest.fixture(scope="module")
async def node(
    require_bwrap: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedNode]:
    store = tmp_path_factory.mktemp("store")
    config = NodeConfig(pool_size=0, images=ImageSettings(store_dir=store))
    STORE.append(store)
    served = await ServedNode("tcp", TEST_LIMITS, IMAGE_SANDBOX_UID + 3, config).start()
    try:
        yield served
    finally:
        await served.stop()


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layouts")
    app = tar_layer({"app/hello.txt": b"hi from a layer\n"})
    return {
        "app": rootfs_layout("bookworm-py", root / "app", config=APP_CONFIG, extra_layers=(app,)),
        "nopy": rootfs_layout("bookworm-nopy", root / "nopy"),
    }


async def bake(node: ServedNode, template_id: str, image: str) -> tuple[int, dict[str, object]]:
    resp = await node.http.post(
        "/v1/templates", json={"template_id": template_id, "image": image}, timeout=300
    )
    return resp.status_code, resp.json()


async def test_an_image_becomes_a_template(node: ServedNode, layouts: dict[str, Path]) -> None:
    status, body = await bake(node, "app", f"oci:{layouts['app']}:v1")
    assert status == 201, body
    assert body["image"] == f"oci:{layouts['app']}:v1" and "app" in body["templates"]
    sess = await node.create_session("app")
    try:
        out = await run(sess, command="pwd; cat hello.txt; echo $GREETING; cat /etc/debian_version")
        lines = out.output.decode().splitlines()
        assert lines[:3] == ["/app", "hi from a layer", "hello from the image"], lines
        assert lines[3].startswith("12.")
        out = await run(sess, code="import sys; print(sys.version_info[:2])")
        assert out.output == b"(3, 11)\n"
        # the store (its blobs, every image's layers) is no path in the image root
        layers = STORE[0] / "layers"
        out = await run(sess, command=f"ls {STORE[0]} {layers} 2>&1 | grep -c 'No such file'")
        assert out.output == b"2\n", out.output
    finally:
        await sess.close()
    rows = (await node.http.get("/v1/images")).json()["images"]
    row = next(r for r in rows if r["id"] == body["image"])
    assert row["used_by"] == ["app"] and row["layers"] == 2 and row["size_bytes"] > 100 << 20
    status, again = await bake(node, "app", f"oci:{layouts['app']}:v1")
    assert status == 409 and again["error_code"] == "template_exists"
    # in use: prune keeps it
    pruned = (await node.http.post("/v1/images/prune")).json()
    assert body["image"] not in pruned["images"]


async def test_an_image_without_python_refuses_code(
    node: ServedNode, layouts: dict[str, Path]
) -> None:
    status, body = await bake(node, "nopy", f"oci:{layouts['nopy']}:v1")
    assert status == 201, body
    sess = await node.create_session("nopy")
    try:
        resp = await node.http.post(f"/v1/sessions/{sess.session_id}/exec", json={"code": "1"})
        assert resp.status_code == 400
        err = resp.json()
        assert err["error_code"] == "bad_request" and "no python3" in err["error"], err
        out = await run(sess, command="echo still fine")
        assert out.output == b"still fine\n"
    finally:
        await NodeSession.close(sess)


async def test_bad_images_are_typed_errors(node: ServedNode, tmp_path: Path) -> None:
    status, body = await bake(node, "missing", f"oci:{tmp_path / 'nothing'}:v1")
    assert (status, body["error_code"]) == (404, "not_found"), body
    status, body = await bake(node, "bad", "UPPER CASE is no reference")
    assert (status, body["error_code"]) == (400, "bad_request"), body
    status, body = await bake(node, "ghost", "127.0.0.1:9/none/such:tag")
    assert status in (404, 502) and body["error_code"] in ("not_found", "upstream_error"), body
    resp = await node.http.post(  # setup commands need the image first: the pull's 404
        "/v1/templates",
        json={"template_id": "withsetup", "image": "oci:/x:v1", "setup": ["true"]},
    )
    assert (resp.status_code, resp.json()["error_code"]) == (404, "not_found")
    templates = (await node.http.get("/v1/health")).json()["templates"]
    assert not {"missing", "bad", "ghost", "withsetup"} & set(templates)


def _layer_dirs(node: ServedNode) -> list[str]:
    return sorted(p.name for p in (node.runtime.state_dir / "layers").iterdir())


def _used_by(rows: list[dict[str, Any]], ref: str) -> list[str]:
    return sorted(next(r for r in rows if r["id"] == ref)["used_by"])


async def test_setup_commands_run_in_the_image_root(
    node: ServedNode, layouts: dict[str, Path]
) -> None:
    ref = f"oci:{layouts['app']}:v1"
    resp = await node.http.post(
        "/v1/templates",
        json={
            "template_id": "app-setup",
            "image": ref,
            "setup": [
                'echo "$GREETING from $(pwd) as $(id -un)" > setup.txt',
                "rm hello.txt /etc/debian_version",  # whiteouts over the image's layers
            ],
            # without ports, ready.cmd is one more setup command
            "ready": {"cmd": "python3 -c 'print(6 * 7)' > answer.txt"},
        },
        timeout=300,
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["image"] == ref and "app-setup" in body["templates"]
    sess = await node.create_session("app-setup")
    try:
        out = await run(
            sess,
            command="cat setup.txt answer.txt; stat -c %U setup.txt; "
            "ls hello.txt /etc/debian_version 2>&1 | grep -c 'No such file'",
        )
        assert out.output.decode().splitlines() == [
            "hello from the image from /app as root",
            "42",
            "root",
            "2",
        ], out.output
    finally:
        await sess.close()
    rows = (await node.http.get("/v1/images")).json()["images"]
    assert "app-setup" in _used_by(rows, ref)
    # a bake over that template: its setup runs in the image's root too, over the first's
    resp = await node.http.post(
        "/v1/templates",
        json={"template_id": "app-setup-2", "base": "app-setup", "setup": ["cp answer.txt 2.txt"]},
        timeout=300,
    )
    assert resp.status_code == 201, resp.text
    sess = await node.create_session("app-setup-2")
    try:
        out = await run(sess, command="cat 2.txt; test -e hello.txt || echo still-gone")
        assert out.output == b"42\nstill-gone\n", out.output
    finally:
        await sess.close()
    rows = (await node.http.get("/v1/images")).json()["images"]
    assert {"app-setup", "app-setup-2"} <= set(_used_by(rows, ref))


async def test_a_failing_setup_is_a_typed_error_that_leaves_nothing(
    node: ServedNode, layouts: dict[str, Path]
) -> None:
    ref = f"oci:{layouts['nopy']}:v1"
    before = _layer_dirs(node)
    resp = await node.http.post(
        "/v1/templates",
        json={
            "template_id": "nopy-fails",
            "image": ref,
            "setup": ["echo about to fail; python3 -V"],
        },
        timeout=300,
    )
    assert (resp.status_code, resp.json()["error_code"]) == (400, "bake_failed"), resp.text
    error = resp.json()["error"]
    assert "exit 127" in error and "about to fail" in error and "python3" in error, error
    assert _layer_dirs(node) == before
    templates = (await node.http.get("/v1/health")).json()["templates"]
    assert "nopy-fails" not in templates
    rows = (await node.http.get("/v1/images")).json()["images"]
    assert "nopy-fails" not in _used_by(rows, ref)


async def test_an_image_without_a_shell_refuses_setup(node: ServedNode) -> None:
    """A tiny image of one program and no ``/bin/sh``: made a template as it is, but a bake
    with setup commands is a 400 that says why."""
    with tempfile.TemporaryDirectory() as tmp:
        layout = write_layout(
            Path(tmp) / "noshell",
            {"v1": Image([Layer({"bin/app": b"\x7fELF not really\n"})], cmd=["/bin/app"])},
        )
        await _refuses_setup_without_a_shell(node, f"oci:{layout}:v1")


async def _refuses_setup_without_a_shell(node: ServedNode, ref: str) -> None:
    before = _layer_dirs(node)
    resp = await node.http.post(
        "/v1/templates",
        json={"template_id": "noshell-setup", "image": ref, "setup": ["true"]},
        timeout=300,
    )
    assert (resp.status_code, resp.json()["error_code"]) == (400, "bad_request"), resp.text
    assert "no /bin/sh" in resp.json()["error"]
    assert _layer_dirs(node) == before
    rows = (await node.http.get("/v1/images")).json()["images"]
    assert "noshell-setup" not in _used_by(rows, ref)
    status, body = await bake(node, "noshell", ref)  # without setup: a template as it is
    assert status == 201, body


def _pull_samples(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("collimate_image_"):
                out[sample.name + str(sorted(sample.labels.items()))] = sample.value
    return out


async def test_pulls_are_counted_in_the_nodes_metrics(
    node: ServedNode, layouts: dict[str, Path], tmp_path: Path
) -> None:
    before = _pull_samples((await node.http.get("/metrics")).text)
    status, _ = await bake(node, "counted-new", f"oci:{layouts['nopy']}:v1")  # maybe cached
    assert status == 201
    status, _ = await bake(node, "counted-again", f"oci:{layouts['nopy']}:v1")  # cached now
    assert status == 201
    status, _ = await bake(node, "counted-missing", f"oci:{tmp_path / 'nothing'}:v1")
    assert status == 404
    after = _pull_samples((await node.http.get("/metrics")).text)

    def moved(outcome: str) -> float:
        key = f"collimate_image_pulls_total[('outcome', '{outcome}')]"
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert moved("ok") + moved("cached") == 2 and moved("cached") >= 1 and moved("error") == 1
    assert after["collimate_image_store_bytes[]"] > 0
