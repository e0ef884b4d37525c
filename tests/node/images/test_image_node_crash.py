"""Nodes sharing one image store, one of them killed: its records of use are released.

Real nodes (``LocalNode``, bwrap) on one store. The killed node (SIGKILL: no drain, no
clean-up) leaves its records in the index; the next node deletes them when it starts,
``collimate images`` lists its image as unused and prune removes it, while the live node's
image and template are kept. A clean stop then releases the live node's records too.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node import LocalNode

from ._rootfs import rootfs_layout, tar_layer

pytestmark = [pytest.mark.bwrap]


@pytest.fixture
def nodes(require_bwrap: None) -> Iterator[list[LocalNode]]:
    started: list[LocalNode] = []
    yield started
    for node in started:
        node.stop()


def _node(nodes: list[LocalNode], store: Path) -> LocalNode:
    node = LocalNode(image_store=store, pool_size=0)
    nodes.append(node)
    return node.start()


def _used_by(node: LocalNode) -> dict[str, list[str]]:
    return {row["id"]: row["used_by"] for row in node.client().store_images()}


def _holders(store: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((store / "index.json").read_bytes())["holders"]
    return doc


def test_a_killed_nodes_images_are_released_and_a_live_ones_kept(
    nodes: list[LocalNode], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    refs = {}
    for name in ("a", "b"):
        extra = tar_layer({f"srv/{name}": f"{name}\n".encode()})
        layout = rootfs_layout("bookworm-nopy", tmp_path / name, extra_layers=(extra,))
        refs[name] = f"oci:{layout}:v1"
    live, killed = _node(nodes, store), _node(nodes, store)
    live.client().bake_template("tmpl-a", [], image=refs["a"])
    killed.client().bake_template("tmpl-b", [], image=refs["b"])
    assert _used_by(live) == {refs["a"]: ["tmpl-a"], refs["b"]: ["tmpl-b"]}
    assert len(_holders(store)) == 2

    os.kill(killed.pid, signal.SIGKILL)  # type: ignore[arg-type]
    killed.wait(30)
    assert len(_holders(store)) == 2  # nobody released them: the node could not
    third = _node(nodes, store)
    [(holder, entry)] = _holders(store).items()  # its start deleted the killed node's
    assert list(entry["templates"]) == ["tmpl-a"] and entry["pid"] == live.pid
    assert os.listdir(store / "holders") == [holder]

    assert _used_by(third) == {refs["a"]: ["tmpl-a"], refs["b"]: []}
    assert third.client().prune_images()["images"] == [refs["b"]]
    assert live.client().exec_once("tmpl-a", command="cat /srv/a")["stdout"] == "a\n"

    live.stop()  # a clean stop releases its records
    assert _used_by(third) == {refs["a"]: []}
    assert third.client().prune_images()["images"] == [refs["a"]]
    assert os.listdir(store / "holders") == []
