"""A node killed while an image-template session runs, and its restart: nothing of the
crashed run is left (processes, sockets, the idmapped layer mounts, which only ever lived in
the launcher's private mount namespace), the image store survives it, and the restarted
node makes the image a template again from the store without fetching it again."""

from __future__ import annotations

from pathlib import Path

import pytest

from collimate_rl.errors import CollimateTransportError
from tests.node.images._rootfs import rootfs_layout

from ._proc import ISOLATION, processes_with, session_sockets
from .test_crash import Make, _in_background, _wait_for

pytestmark = pytest.mark.skipif(ISOLATION == "none", reason="image templates need bwrap")


def _mounts_of(path: Path) -> list[str]:
    with open("/proc/self/mountinfo") as fh:
        return [line for line in fh if str(path) in line]


def test_a_crash_with_an_image_session_and_the_restart(make_node: Make, tmp_path: Path) -> None:
    store = tmp_path / "store"
    layout = rootfs_layout("bookworm-nopy", tmp_path / "layout")
    ref = f"oci:{layout}:v1"
    node = make_node("--pool-size", "0", "--image-store", str(store)).start()
    client = node.client()
    client.bake_template("deb", [], image=ref)
    sid = client.create_session("deb")["session_id"]
    thread, out = _in_background(
        lambda: client.session_exec(sid, command="sleep 31.4242; echo done", timeout_seconds=60)
    )
    _wait_for(lambda: processes_with("31.4242") != [], "the exec to run")
    run = node.snapshot()
    node.kill()
    thread.join(30)
    assert isinstance(out.get("error"), CollimateTransportError), out
    run.assert_gone(cgroups=False)
    assert processes_with("31.4242") == []
    assert _mounts_of(store) == []  # (the launcher's idmapped mounts died with it)

    node.start()
    assert "cleared leftovers of a crashed node" in node.log_text()
    run.assert_gone()
    assert session_sockets(node.state) == []
    client = node.client()
    assert [r["id"] for r in client.store_images()] == [ref]  # the store survived
    before = sorted(p.name for p in (store / "blobs" / "sha256").iterdir())
    client.bake_template("deb", [], image=ref)
    assert sorted(p.name for p in (store / "blobs" / "sha256").iterdir()) == before
    fresh = client.create_session("deb")["session_id"]
    assert client.session_exec(fresh, command="cat /etc/debian_version")["stdout"].startswith("12.")
    client.close()
    assert node.stop() == 0
    node.assert_clean_stop()
