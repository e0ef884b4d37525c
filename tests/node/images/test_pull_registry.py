"""Pulls from a real docker-registry on loopback: every ref form, each auth mode, the errors."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from collimate_rl.node.images.credentials import Credentials
from collimate_rl.node.images.errors import (
    DigestMismatch,
    ImageNotFound,
    ManifestError,
    PlatformNotFound,
    QuotaExceeded,
    RegistryAuthError,
)
from collimate_rl.node.images.manifest import (
    ACCEPT_MANIFESTS,
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    Platform,
)
from collimate_rl.node.images.pull import pull, pull_image
from collimate_rl.node.images.store import ImageStore
from tests.node.images._images import Image, Layer, sha, tar_of, write_layout
from tests.node.images._registry import PASSWORD, USER, missing_tools, skopeo_push
from tests.node.images.conftest import Registries

ALICE = Credentials(USER, PASSWORD)


def _push(
    registries: Registries, tmp_path: Path, name: str, image: Image | dict[str, Image]
) -> str:
    layout = write_layout(
        tmp_path / f"layout-{name.replace('/', '-').replace(':', '-')}", {"t": image}
    )
    return skopeo_push(
        f"oci:{layout}:t", registries.anonymous, name, all_platforms=isinstance(image, dict)
    )


@pytest.fixture(scope="module")
def app(registries: Registries, tmp_path_factory: pytest.TempPathFactory) -> Image:
    """Three layers, one of each compression, pushed as reg/app:v1."""
    image = Image(
        [
            Layer({"etc/os-release": b"ID=test\n"}, "gzip"),
            Layer({"usr/bin/tool": b"#!/bin/sh\necho hi\n" * 50}, "zstd"),
            Layer({"app/main.py": b"print('hi')\n"}, "tar"),
        ]
    )
    _push(registries, tmp_path_factory.mktemp("app"), "reg/app:v1", image)
    return image


def _ref(registry: Any, text: str) -> str:
    return f"{registry.host}/{text}"


def test_anonymous_pull_fetches_every_blob_and_unpacks_each_layer(
    registries: Registries, app: Image, store: Any
) -> None:
    seen: list[tuple[int, int, str]] = []
    result = pull_image(
        _ref(registries.anonymous, "reg/app:v1"), store, progress=lambda *a: seen.append(a)
    )
    record = result.record
    assert record.manifest_digest == app.digest
    assert record.layers == tuple(layer.digest for layer in app.layers)
    assert record.config.cmd == ("/bin/app",) and record.config.working_dir == "/app"
    assert result.layers_fetched == record.layers and result.layers_reused == ()
    layer_bytes = sum(len(layer.blob) for layer in app.layers)
    assert result.bytes_fetched == layer_bytes + len(app.manifest) + len(app.config)
    # each layer unpacked by its media type: gzip, zstd, plain tar
    lower, middle, upper = record.layer_dirs
    assert (lower / "etc/os-release").read_bytes() == b"ID=test\n"
    assert (middle / "usr/bin/tool").read_bytes() == b"#!/bin/sh\necho hi\n" * 50
    assert (upper / "app/main.py").read_bytes() == b"print('hi')\n"
    assert [layer.how for layer in app.layers] == ["gzip", "zstd", "tar"]
    for layer in app.layers:
        assert store.blob_path(layer.digest).read_bytes() == layer.blob
    assert seen[-1][0] == seen[-1][1] == layer_bytes

    again = pull_image(_ref(registries.anonymous, "reg/app:v1"), store)
    assert again.layers_fetched == () and again.bytes_fetched == len(app.manifest)


@pytest.mark.parametrize(
    "form",
    [
        "{host}/reg/app:v1",
        "docker://{host}/reg/app:v1",
        "{host}/reg/app@{d}",
        "{host}/reg/app:v1@{d}",
    ],
)
def test_every_registry_reference_form(
    registries: Registries, app: Image, store: Any, form: str
) -> None:
    text = form.format(host=registries.anonymous.host, d=app.digest)
    record = pull(text, store)
    assert record.manifest_digest == app.digest
    assert record.ref == text.removeprefix("docker://")


def test_a_pinned_image_the_store_holds_pulls_with_no_registry(
    registries: Registries, app: Image, store: Any
) -> None:
    pull(_ref(registries.anonymous, f"reg/app@{app.digest}"), store)
    # nothing listens on port 9: every blob, the manifest included, comes from the store
    again = pull_image(f"127.0.0.1:9/reg/app@{app.digest}", store)
    assert again.bytes_fetched == 0 and again.layers_fetched == ()
    assert again.record.ref == f"127.0.0.1:9/reg/app@{app.digest}"


def test_a_digest_that_is_not_the_tags_is_not_found(
    registries: Registries, app: Image, store: Any
) -> None:
    with pytest.raises(ImageNotFound):
        pull(_ref(registries.anonymous, f"reg/app@{sha(b'other')}"), store)


@pytest.mark.parametrize("name", ["reg/nothing:v1", "reg/app:nosuchtag"])
def test_unknown_images_raise_image_not_found(
    registries: Registries, app: Image, store: Any, name: str
) -> None:
    with pytest.raises(ImageNotFound, match="not found"):
        pull(_ref(registries.anonymous, name), store)


def test_basic_auth_with_credentials_passed(registries: Registries, app: Image, store: Any) -> None:
    assert pull(_ref(registries.basic, "reg/app:v1"), store, auth=ALICE).layers


def _docker_config(tmp_path: Path, key: str, entry: dict[str, str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps({"auths": {key: entry}}))
    return tmp_path


@pytest.mark.parametrize("kind", ["docker-auth", "docker-userpass", "registry-auth-file"])
def test_credentials_are_read_from_docker_and_podman_files(
    registries: Registries, app: Image, store: Any, tmp_path: Path, kind: str
) -> None:
    host = registries.basic.host
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    if kind == "docker-auth":
        env = {"DOCKER_CONFIG": str(_docker_config(tmp_path / "d", host, {"auth": token}))}
    elif kind == "docker-userpass":
        folder = _docker_config(
            tmp_path / "d", f"http://{host}/v2/", {"username": USER, "password": PASSWORD}
        )
        env = {"DOCKER_CONFIG": str(folder)}
    else:
        path = _docker_config(tmp_path / "p", f"{host}/reg", {"auth": token}) / "config.json"
        env = {"REGISTRY_AUTH_FILE": str(path)}
    env["HOME"] = str(tmp_path)
    result = pull_image(_ref(registries.basic, "reg/app:v1"), store, env=env)
    assert result.record.layers


@pytest.mark.parametrize("registry", ["basic", "token"])
@pytest.mark.parametrize(
    "creds", [None, Credentials(USER, "wrong"), Credentials("mallory", PASSWORD)]
)
def test_missing_or_bad_credentials_raise_registry_auth_error(
    registries: Registries,
    app: Image,
    store: Any,
    tmp_path: Path,
    registry: str,
    creds: Credentials | None,
) -> None:
    target = getattr(registries, registry)
    with pytest.raises(RegistryAuthError) as info:
        pull_image(_ref(target, "reg/app:v1"), store, auth=creds, env={"HOME": str(tmp_path)})
    assert "login" in str(info.value) or "credentials" in str(info.value)
    assert not any(store.has_blob(layer.digest) for layer in app.layers)


def test_the_token_realm_is_asked_once_per_scope(
    registries: Registries, app: Image, store: Any
) -> None:
    before = len(registries.issuer.requests)
    record = pull(_ref(registries.token, "reg/app:v1"), store, auth=ALICE)
    asked = registries.issuer.requests[before:]
    assert record.layers == tuple(layer.digest for layer in app.layers)
    assert asked == [{"scope": "repository:reg/app:pull", "user": USER, "auth": True}]


def test_an_anonymous_token_pulls_a_public_repository(
    registries: Registries, store: Any, tmp_path: Path
) -> None:
    image = Image([Layer({"public": b"yes"})])
    _push(registries, tmp_path, "public/app:v1", image)
    before = len(registries.issuer.requests)
    result = pull_image(_ref(registries.token, "public/app:v1"), store, env={"HOME": str(tmp_path)})
    record = result.record
    assert record.manifest_digest == image.digest
    assert registries.issuer.requests[before:] == [
        {"scope": "repository:public/app:pull", "user": None, "auth": False}
    ]


def test_a_quota_too_small_for_the_image_is_a_typed_error(
    registries: Registries, app: Image, tmp_path: Path
) -> None:
    small = ImageStore(tmp_path / "small", max_bytes=len(app.manifest) + len(app.config) + 10)
    with pytest.raises(QuotaExceeded, match="image-store-max-bytes"):
        pull(_ref(registries.anonymous, "reg/app:v1"), small)
    assert small.image(_ref(registries.anonymous, "reg/app:v1")) is None


def test_docker_schema2_manifests_and_manifest_lists(
    registries: Registries, store: Any, tmp_path: Path
) -> None:
    images = {
        "linux/amd64": Image([Layer({"arch": b"amd64"}, "gzip")], arch="amd64"),
        "linux/arm64/v8": Image([Layer({"arch": b"arm64"}, "gzip")], arch="arm64"),
    }
    layout = write_layout(tmp_path / "layout", {"t": images, "one": images["linux/amd64"]})
    single = skopeo_push(f"oci:{layout}:one", registries.anonymous, "docker/one:v1", docker=True)
    listed = skopeo_push(
        f"oci:{layout}:t", registries.anonymous, "docker/multi:v1", docker=True, all_platforms=True
    )
    record = pull(single, store)
    assert (
        json.loads(store.blob_path(record.manifest_digest).read_bytes())["mediaType"]
        == DOCKER_MANIFEST
    )
    assert (record.layer_dirs[0] / "arch").read_bytes() == b"amd64"
    chosen = pull_image(listed, store, platform=Platform("linux", "arm64", "v8")).record
    assert (chosen.layer_dirs[0] / "arch").read_bytes() == b"arm64"
    with httpx.Client() as http:
        top = http.get(
            f"http://{registries.anonymous.host}/v2/docker/multi/manifests/v1",
            headers={"Accept": ACCEPT_MANIFESTS},
        )
    assert top.json()["mediaType"] == DOCKER_MANIFEST_LIST


def test_an_image_built_with_umoci(registries: Registries, store: Any, tmp_path: Path) -> None:
    reason = missing_tools("umoci")
    if reason:
        pytest.skip(reason)
    layout, rootfs = tmp_path / "layout", tmp_path / "rootfs.tar"
    rootfs.write_bytes(
        tar_of({"usr/bin/hello": b"#!/bin/sh\necho hello\n", "srv/data": b"d" * 4096})
    )
    for args in (
        ["init", "--layout", str(layout)],
        ["new", "--image", f"{layout}:1"],
        ["raw", "add-layer", "--image", f"{layout}:1", str(rootfs)],
        [
            "config",
            "--image",
            f"{layout}:1",
            "--config.cmd",
            "/usr/bin/hello",
            "--config.workingdir",
            "/srv",
            "--config.env",
            "GREETING=hi",
            "--config.user",
            "1000:1000",
            "--config.exposedports",
            "8000/tcp",
        ],
    ):
        subprocess.run(["umoci", *args], check=True, capture_output=True)
    ref = skopeo_push(f"oci:{layout}:1", registries.anonymous, "umoci/hello:1")
    record = pull(ref, store)
    assert record.config.cmd == ("/usr/bin/hello",) and record.config.working_dir == "/srv"
    assert ("GREETING", "hi") in record.config.env and record.config.user == "1000:1000"
    assert record.config.exposed_ports == (8000,)
    assert (record.layer_dirs[0] / "usr/bin/hello").read_bytes().startswith(b"#!/bin/sh")


def test_a_tampered_blob_raises_digest_mismatch_and_is_not_kept(
    registries: Registries, store: Any, tmp_path: Path
) -> None:
    image = Image([Layer({"x": b"tamper me" * 100}, "tar")])
    ref = _push(registries, tmp_path, "reg/tampered:v1", image)
    data = registries.anonymous.blob_file(image.layers[0].digest)
    blob = bytearray(data.read_bytes())
    blob[600] ^= 0xFF
    data.write_bytes(bytes(blob))
    with pytest.raises(DigestMismatch) as info:
        pull(ref, store)
    assert info.value.expected == image.layers[0].digest
    assert not store.has_blob(image.layers[0].digest)


def test_a_second_image_on_the_same_base_fetches_only_its_own_layers(
    registries: Registries, store: Any, tmp_path: Path
) -> None:
    base = Layer({"usr/lib/base.so": bytes(range(256)) * 400}, "gzip")
    first = Image([base, Layer({"app/one": b"1" * 1000}, "gzip")], cmd=["one"])
    second = Image([base, Layer({"app/two": b"2" * 3000}, "zstd")], cmd=["two"])
    ref_one = _push(registries, tmp_path, "shared/one:v1", first)
    ref_two = _push(registries, tmp_path, "shared/two:v1", second)
    pull_image(ref_one, store)
    result = pull_image(ref_two, store)
    own = second.layers[1]
    assert result.layers_fetched == (own.digest,)
    assert result.layers_reused == (base.digest,)
    assert result.bytes_fetched == len(own.blob) + len(second.manifest) + len(second.config)


@pytest.fixture(scope="module")
def multi(registries: Registries, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Image]:
    images = {
        "linux/amd64": Image([Layer({"arch": b"amd64"}, "gzip")], arch="amd64"),
        "linux/arm64/v8": Image([Layer({"arch": b"arm64"}, "gzip")], arch="arm64"),
        "linux/arm/v7": Image([Layer({"arch": b"arm"}, "gzip")], arch="arm"),
    }
    _push(registries, tmp_path_factory.mktemp("multi"), "reg/multi:v1", images)
    return images


@pytest.mark.parametrize(
    ("platform", "key"),
    [
        (None, "linux/amd64"),  # the node's own (these machines are x86_64)
        (Platform("linux", "amd64"), "linux/amd64"),
        (Platform("linux", "arm64", "v8"), "linux/arm64/v8"),
        (Platform("linux", "arm", "v7"), "linux/arm/v7"),
    ],
)
def test_a_multi_platform_index_resolves_to_the_platform(
    registries: Registries, multi: dict[str, Image], store: Any, platform: Platform | None, key: str
) -> None:
    import platform as host

    if platform is None and host.machine() != "x86_64":
        pytest.skip("the default-platform case assumes an x86_64 node")
    result = pull_image(_ref(registries.anonymous, "reg/multi:v1"), store, platform=platform)
    assert result.record.manifest_digest == multi[key].digest
    assert result.record.config.architecture == multi[key].arch


def test_an_index_without_the_platform_says_which_it_offers(
    registries: Registries, multi: dict[str, Image], store: Any
) -> None:
    ref = _ref(registries.anonymous, "reg/multi:v1")
    with pytest.raises(PlatformNotFound, match="linux/arm64/v8"):
        pull_image(ref, store, platform=Platform("linux", "s390x"))


def test_an_image_for_another_architecture_is_refused(
    registries: Registries, store: Any, tmp_path: Path
) -> None:
    ref = _push(registries, tmp_path, "reg/riscv:v1", Image([Layer({"a": b"a"})], arch="riscv64"))
    with pytest.raises(PlatformNotFound, match="riscv64"):
        pull_image(ref, store, platform=Platform("linux", "amd64"))


def test_a_non_image_artifact_is_refused(
    registries: Registries, store: Any, tmp_path: Path
) -> None:
    image = Image([Layer({"a": b"a"})])
    layout = write_layout(tmp_path / "artifact", {"t": image})
    doc = json.loads(image.manifest)
    doc["config"]["mediaType"] = "application/vnd.cncf.helm.config.v1+json"
    raw = json.dumps(doc).encode()
    (layout / "blobs/sha256" / sha(raw)[7:]).write_bytes(raw)
    index = json.loads((layout / "index.json").read_text())
    index["manifests"][0].update(digest=sha(raw), size=len(raw))
    (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(ManifestError, match="not a container image"):
        pull(f"oci:{layout}:t", store)
