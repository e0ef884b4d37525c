"""The SDK on an image, end to end on a real local node (``LocalNode``, its own image store):
``Template.bake(client, name=..., image=REF)``, ``client.env(REF, width=N)``, the client's
``store_images`` / ``prune_images``, and a fork group of an image session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node import LocalNode
from collimate_rl.templates import Ready, Template
from collimate_rl.templates._clients import image_template_id

from ._rootfs import rootfs_layout, tar_layer

pytestmark = [pytest.mark.bwrap]


@pytest.fixture(scope="module")
def local(require_bwrap: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    store = tmp_path_factory.mktemp("sdk-store")
    with LocalNode(image_store=store, pool_size=0) as node:
        yield node


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    extra = tar_layer({"srv/task/README": b"task files\n"})
    return rootfs_layout(
        "trixie-py",
        tmp_path_factory.mktemp("sdk-layout") / "trixie",
        config={"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "WorkingDir": "/srv/task"},
        extra_layers=(extra,),
    )


def test_template_bake_with_an_image(local: Any, layout: Path) -> None:
    client = local.client()
    ref = f"oci:{layout}:v1"
    handle = Template.bake(client, name="trixie-task", image=ref, width=4)
    assert handle.id == "trixie-task" and "trixie-task" in client.templates()
    assert Template.bake(client, name="trixie-task", image=ref, width=4).id == "trixie-task"
    out = client.exec_once("trixie-task", command="cat README; python3 -V")
    assert out["stdout"] == "task files\nPython 3.13.5\n" or out["stdout"].startswith(
        "task files\nPython 3.13"
    ), out
    rows = client.store_images()
    assert "trixie-task" in next(r["used_by"] for r in rows if r["id"] == ref)


def test_template_bake_with_an_image_and_a_setup_command(local: Any, layout: Path) -> None:
    """``Ready(cmd=...)`` without ports over an image: a setup command, run once in the
    image's root (its ``WorkingDir``, its python3), its result in every session."""
    client = local.client()
    ref = f"oci:{layout}:v1"
    ready = Ready(cmd="python3 -c 'import sys; print(sys.version_info[0])' > major.txt")
    handle = Template.bake(client, name="trixie-setup", image=ref, ready=ready, width=2)
    assert handle.id == "trixie-setup" and handle.status().phase == "Live"
    out = client.exec_once("trixie-setup", command="cat README major.txt; pwd")
    assert out["stdout"] == "task files\n3\n/srv/task\n", out
    rows = client.store_images()
    assert "trixie-setup" in next(r["used_by"] for r in rows if r["id"] == ref)


def test_env_of_an_image_reference_and_a_fork_group(local: Any, layout: Path) -> None:
    client = local.client()
    ref = f"oci:{layout}:v1"
    with client.env(ref, width=8) as env:
        assert env.id == image_template_id(ref)
        with env.sandbox() as box:
            box.exec(command="echo base > state")
            group = box.fork_group(4)
            try:
                results = group.exec_each(command="cat state; echo $COLLIMATE_SEED | wc -c")
                assert [r.stdout.split()[0] for r in results] == ["base"] * 4
                assert len({r.stdout for r in results}) >= 1
            finally:
                group.close()
    with client.env(ref) as again:  # the same template, not a second pull
        assert again.id == image_template_id(ref)
    assert client.prune_images()["images"] == []  # both templates still use it
