"""``collimate bake NAME --image REF``, ``collimate images`` and ``collimate images prune``
against a real local node with its own image store; the pull's progress bar."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.cli import _images, main
from collimate_rl.cli._output import Output
from collimate_rl.node import LocalNode

from ._rootfs import rootfs_layout

pytestmark = [pytest.mark.bwrap]


@pytest.fixture(scope="module")
def node_url(require_bwrap: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("cli-store")
    with LocalNode(image_store=store, pool_size=0) as node:
        yield f"unix:{node.socket_path}"


def collimate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bake_an_image_list_and_prune(
    node_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = rootfs_layout("bookworm-nopy", tmp_path / "nopy")
    ref = f"oci:{layout}:v1"
    code, out, err = collimate(capsys, "bake", "nopy", "--image", ref, "--json", "--url", node_url)
    assert code == 0, err
    assert json.loads(out)["image"] == ref
    code, out, _ = collimate(
        capsys, "exec", "--template", "nopy", "cat /etc/debian_version", "--url", node_url
    )
    assert code == 0 and out.startswith("12.")
    code, out, _ = collimate(capsys, "images", "--json", "--url", node_url)
    rows = json.loads(out)["images"]
    assert [(r["id"], r["used_by"]) for r in rows] == [(ref, ["nopy"])]
    code, out, _ = collimate(capsys, "images", "--url", node_url)
    assert code == 0 and "nopy" in out and "MiB" in out
    code, out, _ = collimate(capsys, "images", "prune", "--json", "--url", node_url)
    assert code == 0 and json.loads(out)["images"] == []  # still used
    code, _, err = collimate(
        capsys, "bake", "x", "--image", ref, "--base", "python3-net", "--url", node_url
    )
    assert code == 2 and "--image" in err


def test_bake_an_image_with_setup_commands(
    node_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        layout = rootfs_layout("bookworm-nopy", Path(tmp) / "nopy", config={"WorkingDir": "/srv"})
        _bake_with_setup(node_url, capsys, f"oci:{layout}:v1")


def _bake_with_setup(node_url: str, capsys: pytest.CaptureFixture[str], ref: str) -> None:
    code, out, err = collimate(
        capsys,
        "bake",
        "nopy-setup",
        "--image",
        ref,
        "--setup",
        "echo first > one.txt",
        "--setup",
        "rm /etc/debian_version && cat one.txt > two.txt",
        "--json",
        "--url",
        node_url,
    )
    assert code == 0, err
    assert json.loads(out)["template_id"] == "nopy-setup"
    code, out, _ = collimate(
        capsys,
        "exec",
        "--template",
        "nopy-setup",
        "pwd; cat two.txt; test -e /etc/debian_version || echo whited-out",
        "--url",
        node_url,
    )
    assert code == 0 and out == "/srv\nfirst\nwhited-out\n", out
    code, out, _ = collimate(capsys, "images", "--json", "--url", node_url)
    rows = json.loads(out)["images"]
    assert [r["used_by"] for r in rows if r["id"] == ref] == [["nopy-setup"]]
    code, _, err = collimate(
        capsys,
        "bake",
        "nopy-broken",
        "--image",
        ref,
        "--setup",
        "echo from-the-setup; exit 4",
        "--url",
        node_url,
    )
    assert code != 0 and "exit 4" in err and "from-the-setup" in err, err


class _PullingClient:
    """A node client whose bake takes a while and whose pull advances in steps."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def image_pulls(self) -> dict[str, Any]:
        done = min(int((time.monotonic() - self.started) * 1000), 600)
        return {"oci:/x:v1": {"done": done, "total": 600, "what": "layer 1/1"}}

    def bake_template(self, *args: Any, **kw: Any) -> dict[str, Any]:
        time.sleep(0.8)
        return {"template_id": "x"}


def test_a_pull_draws_its_bytes_as_a_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []

    @contextlib.contextmanager
    def progress(
        self: Output, description: str, total: int
    ) -> Iterator[Callable[[int, int], None]]:
        yield lambda done, total: seen.append((done, total))

    monkeypatch.setattr(Output, "shows_progress", property(lambda self: True))
    monkeypatch.setattr(Output, "progress", progress)
    client = _PullingClient()
    out = Output("bake")
    result = _images._with_progress(client, out, lambda: client.bake_template())
    assert result == {"template_id": "x"}
    assert len(seen) >= 2 and all(total == 600 for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == 600
