"""Records of use name their holder: a process that is gone (SIGKILL) holds nothing.

Every holder here is a real process on the store (``python -c`` with an ``ImageStore``),
killed with SIGKILL where the test says so; the store is never mocked. A killed holder's
records are left out of listings and deleted by prune, by a new holder's change and by
``release_gone`` (what a node calls when it starts); a live holder's are kept, also when a
new process has the killed one's pid (pid namespaces make that happen on purpose).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node.images.store import ImageStore

from .test_store import BASE, TOP_A, TOP_B, _image

ROOT = Path(__file__).resolve().parents[3]

#: A holder: uses ``ref`` as ``template`` (optionally forks a child that sleeps), prints its
#: pid and the child's, then holds until its stdin closes (a clean stop: ``close()``).
HOLDER = """
import os, sys, time
from pathlib import Path
from collimate_rl.node.images.store import ImageStore
root, ref, template, fork = sys.argv[1:5]
store = ImageStore(Path(root))
store.use(ref, template)
child = 0
if fork == "fork":
    child = os.fork()
    if child == 0:
        time.sleep(120)
        os._exit(0)
print(os.getpid(), child, flush=True)
sys.stdin.read()
store.close()
"""


class Holder:
    """A holder process of the store at ``root`` (in a pid namespace of its own if asked)."""

    def __init__(
        self, root: Path, ref: str, template: str, *, fork: bool = False, pidns: bool = False
    ) -> None:
        argv = [sys.executable, "-c", HOLDER, str(root), ref, template, "fork" if fork else "-"]
        if pidns:
            argv = ["unshare", "--pid", "--fork", "--kill-child", *argv]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        assert len(line) == 2, f"the holder did not start (exit {self.proc.poll()})"
        #: its pid as it sees it (1 in a pid namespace of its own), its forked child's here
        self.own_pid, self.child = int(line[0]), int(line[1])
        self.pid = _only_child(self.proc.pid) if pidns else self.proc.pid

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(30)

    def cleanup(self) -> None:
        if self.proc.poll() is None:  # (in a pid namespace, unshare ends with its child)
            _kill(self.pid)
            self.proc.wait(30)
        if self.child and _alive(self.child):
            _kill(self.child)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _only_child(pid: int) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            return int(kids[0])
        time.sleep(0.01)
    raise AssertionError(f"{pid} has no child")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.cleanup()


def _users(store: ImageStore) -> dict[str, tuple[str, ...]]:
    return {record.ref: record.used_by for record in store.images()}


def _index(store: ImageStore) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((store.root / "index.json").read_bytes())
    return doc


def _images(tmp_path: Path) -> ImageStore:
    store = ImageStore(tmp_path / "s")
    _image(store, "a:1", [BASE, TOP_A])
    _image(store, "b:1", [BASE, TOP_B])
    return store


def test_a_killed_holders_records_are_released(tmp_path: Path, holders: list[Holder]) -> None:
    store = _images(tmp_path)
    holders.append(Holder(store.root, "a:1", "tmpl"))
    assert _users(store) == {"a:1": ("tmpl",), "b:1": ()}
    assert store.prune(grace_s=0).images == ("b:1",)  # a live holder's image stays
    holders[0].kill()
    assert store.image("a:1").used_by == ()  # type: ignore[union-attr]
    assert len(_index(store)["holders"]) == 1  # still written: a listing deletes it
    assert _users(store) == {"a:1": ()}
    assert _index(store)["holders"] == {} and os.listdir(store.root / "holders") == []
    report = store.prune(grace_s=0)
    assert report.images == ("a:1",) and TOP_A.digest in report.layers
    assert store.images() == [] and store.total_bytes() == 0


def test_prune_and_a_new_holder_release_a_killed_one_without_a_listing(
    tmp_path: Path, holders: list[Holder]
) -> None:
    store = _images(tmp_path)
    holders.append(Holder(store.root, "a:1", "tmpl"))
    holders[0].kill()
    assert store.prune(grace_s=0).images == ("a:1", "b:1")
    _image(store, "a:1", [BASE, TOP_A])
    holders.append(Holder(store.root, "a:1", "tmpl"))
    holders[1].kill()
    holders.append(Holder(store.root, "a:1", "other"))  # its use() deletes the dead records
    [entry] = _index(store)["holders"].values()
    assert list(entry["templates"]) == ["other"] and entry["pid"] == holders[2].pid
    assert len(os.listdir(store.root / "holders")) == 1


def test_a_live_holders_records_are_kept_and_a_clean_stop_releases_them(
    tmp_path: Path, holders: list[Holder]
) -> None:
    store = _images(tmp_path)
    live = Holder(store.root, "a:1", "tmpl")
    killed = Holder(store.root, "b:1", "tmpl")  # the same template id on another node
    holders += [live, killed]
    assert _users(store) == {"a:1": ("tmpl",), "b:1": ("tmpl",)}
    [killed_id] = [h for h, e in _index(store)["holders"].items() if e["pid"] == killed.pid]
    killed.kill()
    assert store.release_gone() == [killed_id]  # what a node does when it starts
    assert store.release_gone() == []
    assert _users(store) == {"a:1": ("tmpl",), "b:1": ()}
    assert store.prune(grace_s=0).images == ("b:1",)
    assert _users(store) == {"a:1": ("tmpl",)}
    assert live.stop() == 0
    assert _users(store) == {"a:1": ()}
    assert os.listdir(store.root / "holders") == []


def test_a_fork_of_a_holder_does_not_keep_its_records(
    tmp_path: Path, holders: list[Holder]
) -> None:
    store = _images(tmp_path)
    holder = Holder(store.root, "a:1", "tmpl", fork=True)
    holders.append(holder)
    holder.kill()
    assert _alive(holder.child)  # the fork outlived it, with the holder's descriptors
    assert _users(store) == {"a:1": (), "b:1": ()}


def test_a_new_process_with_a_dead_holders_pid_does_not_keep_its_records(
    tmp_path: Path, holders: list[Holder]
) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare --pid (util-linux) as root")
    store = _images(tmp_path)
    first = Holder(store.root, "a:1", "tmpl", pidns=True)
    second = Holder(store.root, "b:1", "tmpl", pidns=True)
    holders += [first, second]
    # Both are pid 1 on the same boot and host: by pid, boot id and host name, the second
    # is the first's holder (what pid reuse would make of a dead node's record).
    names = {(h["host"], h["pid"], h["boot_id"]) for h in _index(store)["holders"].values()}
    assert first.own_pid == second.own_pid == 1 and len(names) == 1
    first.kill()
    assert _users(store) == {"a:1": (), "b:1": ("tmpl",)}
    assert store.prune(grace_s=0).images == ("a:1",)


def test_in_one_process_each_store_object_is_a_holder(tmp_path: Path) -> None:
    store = _images(tmp_path)
    other = ImageStore(store.root)
    store.use("a:1", "tmpl")
    other.use("b:1", "tmpl")
    other.release("never-used")
    assert _users(store) == {"a:1": ("tmpl",), "b:1": ("tmpl",)}
    other.release("tmpl")  # its own record only
    assert _users(store) == {"a:1": ("tmpl",), "b:1": ()}
    store.use("b:1", "tmpl")  # replaces its use of a:1
    assert _users(store) == {"a:1": (), "b:1": ("tmpl",)}
    store.close()
    assert _users(store) == {"a:1": (), "b:1": ()}
    store.use("a:1", "again")  # a holder again, with a new file
    assert _users(other) == {"a:1": ("again",), "b:1": ()}


def test_a_holder_whose_file_was_deleted_writes_its_records_again(tmp_path: Path) -> None:
    store = _images(tmp_path)
    store.use("a:1", "tmpl")
    for name in os.listdir(store.root / "holders"):
        os.unlink(store.root / "holders" / name)  # an operator's clean-up, by hand
    assert _users(ImageStore(store.root)) == {"a:1": (), "b:1": ()}
    store.use("b:1", "second")
    assert _users(store) == {"a:1": ("tmpl",), "b:1": ("second",)}
    assert len(os.listdir(store.root / "holders")) == 1


def test_an_index_of_version_1_is_read_with_its_records_released(tmp_path: Path) -> None:
    store = _images(tmp_path)
    doc = _index(store)
    blobs = doc["images"]["a:1"]["blobs"]
    v1 = {"version": 1, "images": doc["images"], "users": {"t": {"ref": "a:1", "blobs": blobs}}}
    (store.root / "index.json").write_text(json.dumps(v1))
    assert _users(store) == {"a:1": (), "b:1": ()}
    store.use("b:1", "tmpl")
    assert _index(store)["version"] == 2 and "users" not in _index(store)
    assert store.prune(grace_s=0).images == ("a:1",)
