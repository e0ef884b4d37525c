"""Warm-up builds shared by the nodes of one machine: who waits for whom, and what a failed
build means (host side, no sandbox: real processes, real locks)."""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path

import pytest

from collimate_rl.node.runtime.base import Limits, RuntimeError_, TemplateSpec
from collimate_rl.node.runtime.languages import LanguageTemplates
from collimate_rl.node.runtime.toolcache import _build_locked


def _writes(marker: Path) -> list[str]:
    """A build command that writes ``tmp`` and notes that it ran."""
    return ["sh", "-c", f'echo built > "$1" && echo ran >> {marker}', "sh"]


class OtherNode:
    """Holds the build lock of ``folder``, as another node's build does."""

    def __init__(self, folder: Path) -> None:
        self.fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def done(self) -> None:
        os.close(self.fd)  # (as when its process ends, however it ends)


async def _required_build_beside(folder: Path, marker: Path, other_finishes: Path | None) -> None:
    """A required build of ``folder/cache`` while another node holds the lock; that node
    then finishes (having written ``other_finishes``, if given) and lets go of it."""
    other = OtherNode(folder)
    build = asyncio.create_task(
        _build_locked(folder, folder / "cache", lambda tmp: [*_writes(marker), tmp], required=True)
    )
    await asyncio.sleep(1.2)  # more than two looks at the lock
    assert not build.done(), "it waits for the other node"
    if other_finishes is not None:
        await asyncio.to_thread(other_finishes.write_text, "built by the other node")
    other.done()
    await asyncio.wait_for(build, 30)


def test_a_required_warm_up_another_node_builds_is_waited_for(tmp_path: Path) -> None:
    target, marker = tmp_path / "cache", tmp_path / "ran"
    asyncio.run(_required_build_beside(tmp_path, marker, other_finishes=target))
    assert target.read_text() == "built by the other node" and not marker.exists()


def test_a_required_warm_up_whose_builder_died_is_built_here(tmp_path: Path) -> None:
    target, marker = tmp_path / "cache", tmp_path / "ran"
    asyncio.run(_required_build_beside(tmp_path, marker, other_finishes=None))  # left nothing
    assert target.read_text() == "built\n" and marker.read_text() == "ran\n"


def test_an_optional_warm_up_another_node_builds_is_left_to_it(tmp_path: Path) -> None:
    target, marker = tmp_path / "cache", tmp_path / "ran"
    other = OtherNode(tmp_path)
    try:
        asyncio.run(
            asyncio.wait_for(
                _build_locked(tmp_path, target, lambda tmp: [*_writes(marker), tmp]), 5
            )
        )
    finally:
        other.done()
    assert not target.exists() and not marker.exists()


def test_a_failed_required_warm_up_says_why(tmp_path: Path) -> None:
    def fails(tmp: str) -> list[str]:
        return ["sh", "-c", "echo 'no space left on device' >&2; exit 3"]

    with pytest.raises(RuntimeError, match="no space left on device"):
        asyncio.run(_build_locked(tmp_path, tmp_path / "cache", fails, required=True))
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]  # nothing half-built left


FAKE_GO = """#!/bin/sh
# a Go toolchain whose standard library does not compile
case "$1 $2" in
  "env GOROOT") echo /usr/lib/go-fake ;;
  env*) printf 'go1.99\\n/usr/lib/go-fake\\nlinux\\namd64\\nv1\\n0\\n' ;;
  build*) echo "go: writing the build cache: no space left on device" >&2; exit 1 ;;
  *) exit 2 ;;
esac
"""


SLOW_GO = """#!/bin/sh
# a Go toolchain whose standard library takes a while to compile
case "$1 $2" in
  "env GOROOT") echo /usr/lib/go-fake ;;
  env*) printf 'go1.99\\n/usr/lib/go-fake\\nlinux\\namd64\\nv1\\n0\\n' ;;
  build*) echo started >> BUILDS; sleep 2; mkdir -p "$GOCACHE" && echo x > "$GOCACHE/a" ;;
  *) exit 2 ;;
esac
"""


def _fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> LanguageTemplates:
    """The Go language template of a node whose only toolchain is ``script``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(script)
    (bin_dir / "go").chmod(0o755)
    monkeypatch.setenv("COLLIMATE_TOOLCHAIN_PATH", str(bin_dir))
    monkeypatch.setenv("COLLIMATE_CACHE_DIR", str(tmp_path / "cache"))
    templates = LanguageTemplates("go")
    templates.detect()
    assert "go" in templates.ids()
    return templates


def test_a_request_that_stops_waiting_leaves_the_go_warm_up_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Go session waits for the standard library's build (~1 min, longer on a
    busy machine). A request that gives up first (its client timed out) must not take the
    build down with it: else every retry would start it over, and none would finish."""
    builds = tmp_path / "builds"
    templates = _fake_go(tmp_path, monkeypatch, SLOW_GO.replace("BUILDS", str(builds)))
    added: list[TemplateSpec] = []

    async def add_template(spec: TemplateSpec) -> None:
        added.append(spec)

    async def run() -> None:
        first = asyncio.create_task(templates.start("go", Limits(), add_template))
        await asyncio.sleep(1.0)
        first.cancel()  # the first request gives up
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await templates.start("go", Limits(), add_template) == "go"  # the next waits
        await templates.close()

    asyncio.run(run())
    assert builds.read_text() == "started\n"  # one build, never started over
    (spec,) = added
    assert dict(spec.env)["GOCACHE"].endswith("/cache")


def test_a_go_that_cannot_compile_its_standard_library_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the compiled standard library every Go grade would run out of time (reward
    0.0 for a correct program): the template is not offered, and says why, instead."""
    templates = _fake_go(tmp_path, monkeypatch, FAKE_GO)
    added = []

    async def add_template(spec: TemplateSpec) -> None:
        added.append(spec)

    with pytest.raises(RuntimeError_, match="no space left on device"):
        asyncio.run(templates.start("go", Limits(), add_template))
    assert added == [] and "go" not in templates.ids()
    assert "build std" in templates.unavailable()["go"]
    assert "no space left on device" in templates.unavailable()["go"]
