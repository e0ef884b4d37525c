"""Local images: OCI layouts, oci-archive and docker-archive, read without extracting."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from collimate_rl.node.images.errors import DigestMismatch, ImageNotFound, ImagePullError
from collimate_rl.node.images.manifest import Platform
from collimate_rl.node.images.pull import pull, pull_image
from tests.node.images._images import Image, Layer, sha, tar_directory, tar_of, write_layout

APP = Image([Layer({"etc/hostname": b"box\n"}, "gzip"), Layer({"app/run": b"run\n"}, "tar")])
OTHER = Image([Layer({"etc/hostname": b"other\n"}, "gzip")], cmd=["/other"])


def _skopeo(*args: str) -> None:
    if shutil.which("skopeo") is None:
        pytest.skip("skopeo not installed (apt-get install skopeo; .ci/run does)")
    subprocess.run(
        ["skopeo", "--insecure-policy", "copy", "-q", *args], check=True, capture_output=True
    )


def test_an_oci_layout_by_tag(tmp_path: Path, store: Any) -> None:
    layout = write_layout(tmp_path / "layout", {"v1": APP, "v2": OTHER})
    result = pull_image(f"oci:{layout}:v1", store)
    assert result.record.manifest_digest == APP.digest
    assert result.reference == f"oci:{layout}:v1"
    assert result.layers_fetched == tuple(layer.digest for layer in APP.layers)
    lower, upper = result.record.layer_dirs
    assert (lower / "etc/hostname").read_bytes() == b"box\n"
    assert (upper / "app/run").read_bytes() == b"run\n"
    assert pull(f"oci:{layout}:v2", store).config.cmd == ("/other",)


def test_a_relative_layout_path_is_recorded_absolute(
    tmp_path: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_layout(tmp_path / "layout", {"v1": APP})
    monkeypatch.chdir(tmp_path)
    assert pull("oci:layout", store).ref == f"oci:{tmp_path / 'layout'}"


def test_a_layout_with_several_images_needs_a_tag(tmp_path: Path, store: Any) -> None:
    layout = write_layout(tmp_path / "layout", {"v1": APP, "v2": OTHER})
    with pytest.raises(ImageNotFound, match="tags: v1, v2"):
        pull(f"oci:{layout}", store)
    with pytest.raises(ImageNotFound, match="no image tagged 'v3'"):
        pull(f"oci:{layout}:v3", store)


@pytest.mark.parametrize("make", ["missing", "file", "empty"])
def test_what_is_not_a_layout_is_refused(tmp_path: Path, store: Any, make: str) -> None:
    target = tmp_path / "x"
    if make == "file":
        target.write_text("hello")
    elif make == "empty":
        target.mkdir()
    with pytest.raises(ImageNotFound):
        pull(f"oci:{target}", store)


def test_a_multi_platform_layout_resolves_to_the_platform(tmp_path: Path, store: Any) -> None:
    arm = Image([Layer({"arch": b"arm64"})], arch="arm64")
    amd = Image([Layer({"arch": b"amd64"})], arch="amd64")
    layout = write_layout(tmp_path / "layout", {"multi": {"linux/amd64": amd, "linux/arm64": arm}})
    record = pull_image(
        f"oci:{layout}:multi", store, platform=Platform("linux", "arm64", "v8")
    ).record
    assert record.manifest_digest == arm.digest


@pytest.mark.parametrize("which", ["layer", "config", "manifest"])
def test_a_tampered_layout_blob_raises_digest_mismatch(
    tmp_path: Path, store: Any, which: str
) -> None:
    layout = write_layout(tmp_path / "layout", {"v1": APP})
    digest = {"layer": APP.layers[1].digest, "config": sha(APP.config), "manifest": APP.digest}[
        which
    ]
    path = layout / "blobs/sha256" / digest[7:]
    path.write_bytes(
        path.read_bytes().replace(b"}", b" }", 1) if which != "layer" else b"x" + path.read_bytes()
    )
    with pytest.raises(DigestMismatch):
        pull(f"oci:{layout}:v1", store)
    assert not store.has_blob(digest)


def test_an_oci_archive_written_from_python(tmp_path: Path, store: Any) -> None:
    layout = write_layout(tmp_path / "layout", {"v1": APP, "v2": OTHER})
    archive = tar_directory(layout, tmp_path / "image.tar")
    shutil.rmtree(layout)
    assert pull(f"oci-archive:{archive}:v2", store).manifest_digest == OTHER.digest


def test_an_oci_archive_written_by_skopeo(tmp_path: Path, store: Any) -> None:
    layout = write_layout(tmp_path / "layout", {"v1": APP})
    _skopeo(f"oci:{layout}:v1", f"oci-archive:{tmp_path / 'image.tar'}:v1")
    record = pull(f"oci-archive:{tmp_path / 'image.tar'}:v1", store)
    assert record.config.cmd == ("/bin/app",)
    assert len(record.layers) == 2


def test_a_docker_archive_written_by_skopeo(tmp_path: Path, store: Any) -> None:
    layout = write_layout(tmp_path / "layout", {"v1": APP})
    archive = tmp_path / "saved.tar"
    _skopeo(f"oci:{layout}:v1", f"docker-archive:{archive}:example/app:v1")
    first = pull_image(f"docker-archive:{archive}", store)
    assert first.record.config.cmd == ("/bin/app",)
    assert first.record.config.diff_ids == tuple(sha(layer.diff) for layer in APP.layers)
    by_name = pull_image(f"docker-archive:{archive}:example/app:v1", store)
    # the manifest written for the archive is the same each time: nothing is fetched again
    assert by_name.record.manifest_digest == first.record.manifest_digest
    assert by_name.layers_fetched == ()


def _docker_save(path: Path, images: dict[str, Image], *, link_first_layer: bool = False) -> Path:
    """A docker-archive in the legacy layout: <id>/layer.tar, <hex>.json, manifest.json."""
    members: dict[str, bytes] = {}
    links: dict[str, str] = {}
    entries = []
    for number, (tag, image) in enumerate(images.items()):
        names = []
        for position, layer in enumerate(image.layers):
            name = f"{number}{position}{'a' * 62}/layer.tar"
            if link_first_layer and number == 1 and position == 0:
                links[name] = f"../0{position}{'a' * 62}/layer.tar"
            else:
                members[name] = layer.blob  # docker writes .diff; a gzip'd one is hashed
            names.append(name)
        config_name = f"{sha(image.config)[7:]}.json"
        members[config_name] = image.config
        entries.append({"Config": config_name, "RepoTags": [tag], "Layers": names})
    members["manifest.json"] = json.dumps(entries).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return path


def test_a_docker_archive_with_several_images_and_a_linked_layer(
    tmp_path: Path, store: Any
) -> None:
    base = Layer({"base": b"base"}, "tar")
    one = Image([base, Layer({"one": b"1"}, "tar")], cmd=["one"])
    two = Image([base, Layer({"two": b"2"}, "gzip")], cmd=["two"])
    archive = _docker_save(
        tmp_path / "saved.tar",
        {"one:v1": one, "docker.io/library/two:v2": two},
        link_first_layer=True,
    )
    with pytest.raises(ImageNotFound, match="name one as"):
        pull(f"docker-archive:{archive}", store)
    with pytest.raises(ImageNotFound, match="no image 'three:v1'"):
        pull(f"docker-archive:{archive}:three:v1", store)
    assert pull(f"docker-archive:{archive}:one:v1", store).config.cmd == ("one",)
    # "two:v2" is Docker Hub's library/two:v2; its first layer is a link to one's
    result = pull_image(f"docker-archive:{archive}:two:v2", store)
    assert result.record.config.cmd == ("two",)
    assert result.layers_reused == (base.digest,)
    assert result.record.layers[1] == sha(two.layers[1].blob)
    assert (result.record.layer_dirs[1] / "two").read_bytes() == b"2"
    assert (
        result.record.layer_dirs[0] == store.image(f"docker-archive:{archive}:one:v1").layer_dirs[0]
    )


def test_a_docker_archive_layer_that_contradicts_its_diff_id(tmp_path: Path, store: Any) -> None:
    image = Image([Layer({"a": b"a"}, "tar")])
    archive = _docker_save(tmp_path / "saved.tar", {"a:v1": image})
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    layer_name = next(name for name in members if name.endswith("layer.tar"))
    members[layer_name] = tar_of({"a": b"evil"})
    with tarfile.open(archive, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DigestMismatch):
        pull(f"docker-archive:{archive}", store)


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../etc/passwd"])
def test_archive_links_never_reach_outside_the_archive(
    tmp_path: Path, store: Any, target: str
) -> None:
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("index.json")
        info.type = tarfile.SYMTYPE
        info.linkname = target
        tar.addfile(info)
        evil = tarfile.TarInfo("../../escaped")
        evil.size = 4
        tar.addfile(evil, io.BytesIO(b"evil"))
    with pytest.raises(ImageNotFound, match="no "):
        pull(f"oci-archive:{archive}", store)
    assert not (tmp_path.parent.parent / "escaped").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar", "store"]


def test_a_file_that_is_not_a_tar_is_refused(tmp_path: Path, store: Any) -> None:
    (tmp_path / "not.tar").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ImagePullError, match="not a readable tar"):
        pull(f"docker-archive:{tmp_path / 'not.tar'}", store)
