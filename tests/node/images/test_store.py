"""The content-addressed image store: blobs, resume, quota, shared layers, images, prune,
restarts and two processes at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
from pathlib import Path

import pytest

from collimate_rl.node.images.config import ImageConfig
from collimate_rl.node.images.errors import (
    DigestMismatch,
    ImageNotFound,
    ImageStoreError,
    LayerError,
    QuotaExceeded,
)
from collimate_rl.node.images.store import ImageStore

from ._layers import Blob, device, file, layer_blob, sha256

CONFIG = ImageConfig(env=(("PATH", "/usr/bin:/bin"),), cmd=("python3",))


def _pull(store: ImageStore, blob: Blob) -> Path:
    """What the puller does with a layer: download into the partial, commit, unpack."""
    handle, offset = store.open_partial(blob.digest)
    with handle:
        handle.write(blob.data[offset:])
    store.commit_partial(blob.digest)
    return store.unpack_layer(blob.digest, blob.media_type)


def _image(store: ImageStore, ref: str, layers: list[Blob]) -> None:
    config = json.dumps(CONFIG.to_json()).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"digest": sha256(config), "size": len(config)},
            "layers": [{"digest": b.digest} for b in layers],
        }
    ).encode()
    store.put_blob(sha256(config), config)
    store.put_blob(sha256(manifest), manifest)
    for blob in layers:
        if not store.has_blob(blob.digest):
            _pull(store, blob)
        store.unpack_layer(blob.digest, blob.media_type)
    store.record_image(ref, sha256(manifest), CONFIG, [b.digest for b in layers])


def _leftovers(store: ImageStore) -> list[str]:
    return sorted(os.listdir(store.root / "tmp")) + sorted(
        os.listdir(store.root / "partial" / "sha256")
    )


# deterministic content: the spawned processes of the tests build the same blobs
_RANDOM = random.Random(42)
BASE = layer_blob([file("usr/bin/python3", _RANDOM.randbytes(20_000), mode=0o755)])
TOP_A = layer_blob([file("app/a.py", b"print('a')")])
TOP_B = layer_blob([file("app/b.py", b"print('b')")])


# -- blobs ------------------------------------------------------------------------------


def test_blobs_are_kept_by_digest(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    path = store.put_blob(sha256(b"{}"), b"{}")
    assert path == tmp_path / "s" / "blobs" / "sha256" / sha256(b"{}").split(":")[1]
    assert store.has_blob(sha256(b"{}")) and not store.has_blob(sha256(b"other"))
    with pytest.raises(DigestMismatch):
        store.put_blob(sha256(b"{}"), b"[]")
    with pytest.raises(ImageStoreError, match="not a sha256 digest"):
        store.blob_path("sha256:../../etc/passwd")


def test_an_interrupted_download_resumes_where_it_stopped(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    handle, offset = store.open_partial(BASE.digest)
    with handle:
        assert offset == 0
        handle.write(BASE.data[:1000])
    # a node restart: a new store on the same directory
    store = ImageStore(tmp_path / "s")
    handle, offset = store.open_partial(BASE.digest)
    assert offset == 1000
    with handle:
        handle.write(BASE.data[offset:])
    assert store.commit_partial(BASE.digest).read_bytes() == BASE.data
    assert _leftovers(store) == []


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_partial_that_does_not_match_its_digest_is_deleted(tmp_path: Path, damage: str) -> None:
    store = ImageStore(tmp_path / "s")
    data = BASE.data[:-10] if damage == "truncated" else b"X" + BASE.data[1:]
    handle, _ = store.open_partial(BASE.digest)
    handle.write(data)  # left open: commit closes it
    with pytest.raises(DigestMismatch):
        store.commit_partial(BASE.digest)
    assert not store.has_blob(BASE.digest)
    assert _leftovers(store) == []
    assert store.open_partial(BASE.digest)[1] == 0


def _second_writer(root: Path, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    other = ImageStore(root)
    handle, offset = other.open_partial(BASE.digest)  # blocks until the first closes
    handle.close()
    queue.put((offset, other.commit_partial(BASE.digest).name))


def test_a_second_writer_of_the_same_blob_waits_for_the_first(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    handle, _ = store.open_partial(BASE.digest)
    handle.write(BASE.data)
    handle.flush()
    # spawned, not forked: a forked child would share the first writer's open file (and lock)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_second_writer, args=(store.root, queue))
    child.start()
    time.sleep(2)
    assert queue.empty()
    handle.close()
    store.commit_partial(BASE.digest)
    offset, name = queue.get(timeout=60)
    child.join(10)
    # it saw the whole partial (or the committed blob) and commits to the same blob
    assert name == BASE.digest.split(":")[1]
    assert offset in (0, len(BASE.data))
    assert store.blob_path(BASE.digest).read_bytes() == BASE.data


# -- quota --------------------------------------------------------------------------------


def test_a_blob_over_the_quota_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s", max_bytes=len(BASE.data) - 1)
    handle, _ = store.open_partial(BASE.digest)
    with handle:
        handle.write(BASE.data)
    with pytest.raises(QuotaExceeded) as err:
        store.commit_partial(BASE.digest)
    assert err.value.needed == len(BASE.data)
    with pytest.raises(QuotaExceeded):
        store.put_blob(sha256(b"x" * 100_000), b"x" * 100_000)
    assert store.total_bytes() == 0
    assert _leftovers(store) == []


def test_a_layer_that_unpacks_past_the_quota_is_refused_whole(tmp_path: Path) -> None:
    big = layer_blob([file("a", os.urandom(1 << 16)), file("b", os.urandom(1 << 16))])
    store = ImageStore(tmp_path / "s", max_bytes=len(big.data) + (1 << 16))
    store.put_blob(big.digest, big.data)
    before = store.total_bytes()
    with pytest.raises(QuotaExceeded):
        store.unpack_layer(big.digest, big.media_type)
    assert store.total_bytes() == before
    assert _leftovers(store) == []
    assert not store.blob_path(big.digest).with_name("x").exists()
    assert sorted(os.listdir(store.root / "layers" / "sha256")) == [
        big.digest.split(":")[1] + ".lock"
    ]


def test_an_image_larger_than_the_quota_stops_at_the_layer_that_passes_it(
    tmp_path: Path,
) -> None:
    layers = [layer_blob([file(f"l{i}", os.urandom(40_000))]) for i in range(3)]
    store = ImageStore(tmp_path / "s", max_bytes=200_000)
    with pytest.raises(QuotaExceeded):
        _image(store, "big:1", layers)
    assert store.total_bytes() <= 200_000
    assert store.image("big:1") is None
    assert _leftovers(store) == []


# -- layers ---------------------------------------------------------------------------------


def test_a_layer_is_unpacked_once_and_shared(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    _image(store, "a:1", [BASE, TOP_A])
    ino = os.stat(store.root / "layers" / "sha256" / BASE.digest.split(":")[1] / "usr/bin/python3")
    _image(store, "b:1", [BASE, TOP_B])
    a, b = store.image("a:1"), store.image("b:1")
    assert a is not None and b is not None
    assert a.layer_dirs[0] == b.layer_dirs[0]
    assert os.stat(a.layer_dirs[0] / "usr/bin/python3").st_ino == ino.st_ino
    assert (b.layer_dirs[1] / "app/b.py").read_bytes() == b"print('b')"
    assert os.stat(a.layer_dirs[0]).st_mode & 0o755 == 0o755


def test_a_crashed_unpack_is_not_mistaken_for_a_finished_one(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    store.put_blob(BASE.digest, BASE.data)
    hexpart = BASE.digest.split(":")[1]
    # what a crash leaves: a half-written temporary directory, or a layer dir whose
    # record was never written
    (store.root / "tmp" / f"{hexpart}.999.dead").mkdir()
    (store.root / "layers" / "sha256" / hexpart).mkdir()
    layer = store.unpack_layer(BASE.digest, BASE.media_type)
    assert (layer / "usr/bin/python3").is_file()
    store.prune(grace_s=0)
    assert os.listdir(store.root / "tmp") == []


def test_what_was_neutralised_is_recorded_per_layer(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    blob = layer_blob([device("dev/null"), file("bin/su", b"x", mode=0o4755)])
    store.put_blob(blob.digest, blob.data)
    store.unpack_layer(blob.digest, blob.media_type)
    report = ImageStore(tmp_path / "s").layer_report(blob.digest)
    assert report is not None
    assert [n.what for n in report.neutralised] == [
        "device node 1:3 skipped",
        "setuid/setgid bits dropped (was 0o4755)",
    ]
    assert ImageStore(tmp_path / "s").layer_report(BASE.digest) is None


def test_an_unsafe_layer_leaves_nothing(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    blob = layer_blob([file("../escape", b"x")])
    store.put_blob(blob.digest, blob.data)
    with pytest.raises(LayerError):
        store.unpack_layer(blob.digest, blob.media_type)
    assert store.layer_report(blob.digest) is None
    assert _leftovers(store) == []


def test_unpacking_a_layer_not_in_the_store_says_so(tmp_path: Path) -> None:
    with pytest.raises(ImageStoreError, match="pull it first"):
        ImageStore(tmp_path / "s").unpack_layer(BASE.digest, BASE.media_type)


def _unpack_in_child(root: Path, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    store = ImageStore(root)
    queue.put(str(store.unpack_layer(BIG.digest, BIG.media_type)))


BIG = layer_blob([file(f"f{i}", _RANDOM.randbytes(20_000)) for i in range(200)])


def test_two_processes_unpacking_one_layer_unpack_it_once(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    store.put_blob(BIG.digest, BIG.data)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    children = [ctx.Process(target=_unpack_in_child, args=(store.root, queue)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    paths = {queue.get(timeout=5) for _ in children}
    assert len(paths) == 1
    assert len(os.listdir(paths.pop())) == 200
    assert os.listdir(store.root / "tmp") == []


# -- images, templates, prune, restarts ----------------------------------------------------


def test_images_survive_a_restart_with_their_users(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    _image(store, "a:1", [BASE, TOP_A])
    store.use("a:1", "tmpl-1")
    store.use("a:1", "tmpl-2")
    again = ImageStore(tmp_path / "s")
    record = again.image("a:1")
    assert record is not None
    assert record.config == CONFIG
    assert record.layers == (BASE.digest, TOP_A.digest)
    assert record.used_by == ("tmpl-1", "tmpl-2")
    assert record.size_bytes > len(BASE.data) + 20_000
    assert [r.ref for r in again.images()] == ["a:1"]
    again.release("tmpl-1")  # not its record: another holder's (test_store_holders.py)
    assert again.image("a:1").used_by == ("tmpl-1", "tmpl-2")  # type: ignore[union-attr]
    store.release("tmpl-1")
    store.release("never-used")
    assert ImageStore(tmp_path / "s").image("a:1").used_by == ("tmpl-2",)  # type: ignore[union-attr]
    store.close()  # the node's clean stop
    assert ImageStore(tmp_path / "s").image("a:1").used_by == ()  # type: ignore[union-attr]


def test_using_an_image_not_in_the_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageNotFound):
        ImageStore(tmp_path / "s").use("nope:1", "t")


def test_recording_an_image_whose_layers_are_missing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageStoreError, match="not unpacked"):
        ImageStore(tmp_path / "s").record_image("x:1", sha256(b"m"), CONFIG, [BASE.digest])


def test_prune_removes_unused_images_and_what_only_they_held(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    _image(store, "a:1", [BASE, TOP_A])
    _image(store, "b:1", [BASE, TOP_B])
    store.use("b:1", "tmpl")
    total = store.total_bytes()
    report = store.prune(grace_s=0)
    assert report.images == ("a:1",)
    assert report.layers == (TOP_A.digest,)
    assert TOP_A.digest in report.blobs and BASE.digest not in report.blobs
    assert store.total_bytes() == total - report.freed_bytes
    b = store.image("b:1")
    assert b is not None and all(d.is_dir() for d in b.layer_dirs)
    store.release("tmpl")
    store.prune(grace_s=0)
    assert store.images() == [] and store.total_bytes() == 0


def test_prune_keeps_what_a_pull_under_way_touched(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    _image(store, "a:1", [BASE])
    _pull(store, TOP_A)  # a second pull, not recorded yet
    report = store.prune()  # the default grace
    assert report.images == ("a:1",)
    assert report.layers == () and report.blobs == ()
    assert store.has_blob(TOP_A.digest)


def test_a_template_keeps_its_layers_when_its_tag_moves(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    _image(store, "app:latest", [BASE, TOP_A])
    store.use("app:latest", "old-template")
    _image(store, "app:latest", [BASE, TOP_B])  # the tag moved
    store.prune(grace_s=0)
    assert (store.root / "layers" / "sha256" / TOP_A.digest.split(":")[1]).is_dir()
    store.release("old-template")
    report = store.prune(grace_s=0)
    assert report.images == ("app:latest",)
    assert set(report.layers) == {BASE.digest, TOP_A.digest, TOP_B.digest}


def test_the_index_is_only_ever_replaced_whole(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "s")
    _image(store, "a:1", [BASE])
    assert json.loads((store.root / "index.json").read_bytes())["images"]["a:1"]["layers"] == [
        BASE.digest
    ]
    assert [p for p in os.listdir(store.root) if p.startswith(".")] == []
