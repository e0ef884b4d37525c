"""Fixtures of the image tests: the three registries (one storage), a store per test; and
for the image-template tests, one bwrap runtime with image templates made from real Debian
root filesystems (``_rootfs.py``), shared by a module's tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from collimate_rl.node.images.store import ImageStore
from collimate_rl.node.runtime import ImageRoot, LocalRuntime, TemplateSpec, create_runtime
from tests.node.images._registry import Registry, TokenIssuer, htpasswd_auth, missing_tools

from ..runtime.conftest import SANDBOX_UID, TEST_LIMITS, bwrap_reason
from ._rootfs import rootfs_layer


@dataclass
class Registries:
    anonymous: Registry
    basic: Registry
    token: Registry
    issuer: TokenIssuer


@pytest.fixture(scope="session")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    reason = missing_tools("docker-registry", "skopeo")
    if reason:
        pytest.skip(reason)
    pytest.importorskip("bcrypt", reason="bcrypt makes the htpasswd file (pip install bcrypt)")
    pytest.importorskip("cryptography", reason="cryptography signs the test tokens")
    root = tmp_path_factory.mktemp("registries")
    storage = root / "storage"
    started: list[Registry] = []
    issuer = TokenIssuer(root / "issuer")
    try:
        started.append(Registry(root / "anonymous", storage))
        started.append(Registry(root / "basic", storage, htpasswd_auth(root / "basic")))
        started.append(Registry(root / "token", storage, issuer.auth_config()))
        yield Registries(*started, issuer)
    finally:
        for registry in started:
            registry.stop()
        issuer.stop()


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "store")


#: A uid of its own for these tests' sandboxes (the runtime tests use SANDBOX_UID..+3).
IMAGE_SANDBOX_UID = SANDBOX_UID + 7
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def require_bwrap() -> None:
    reason = bwrap_reason()
    if reason is not None:
        pytest.skip(f"bwrap unusable: {reason}")


def app_user_layer(folder: Path, base: Path) -> Path:
    """A layer over ``base`` adding the user ``app`` (uid/gid 1001, home ``/home/app``, its
    own), as a Dockerfile's ``useradd`` would."""
    (folder / "etc").mkdir(parents=True)
    passwd = (base / "etc/passwd").read_text() + "app:x:1001:1001::/home/app:/bin/sh\n"
    (folder / "etc/passwd").write_text(passwd)
    (folder / "etc/group").write_text((base / "etc/group").read_text() + "app:x:1001:\n")
    home = folder / "home/app"
    home.mkdir(parents=True)
    (home / ".profile").write_text("# app\n")
    for path in (home, home / ".profile"):
        os.chown(path, 1001, 1001)
    return folder


def image(layers: tuple[Path, ...], **kw: object) -> ImageRoot:
    env = (("PATH", PATH), *kw.pop("env", ()))  # type: ignore[misc]
    return ImageRoot(layers=layers, env=env, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
async def img_rt(
    require_bwrap: None, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalRuntime]:
    """A runtime with the templates ``bookworm`` (python 3.11, ``Env`` FOO=bar,
    ``WorkingDir`` /work), ``trixie`` (python 3.13), ``nopy`` (no python3) and ``appuser``
    (bookworm run as ``User`` app)."""
    bookworm = rootfs_layer("bookworm-py")
    trixie = rootfs_layer("trixie-py")
    nopy = rootfs_layer("bookworm-nopy")
    extra = tmp_path_factory.mktemp("app-layer")
    shutil.rmtree(extra)
    app = app_user_layer(extra, bookworm)
    runtime = create_runtime("bwrap", limits=TEST_LIMITS, sandbox_uid=IMAGE_SANDBOX_UID)
    await runtime.start()
    try:
        for spec in (
            TemplateSpec(
                "bookworm",
                image=image((bookworm,), env=(("FOO", "bar"),), working_dir="/work", ref="b"),
            ),
            TemplateSpec("trixie", image=image((trixie,), ref="trixie")),
            TemplateSpec("nopy", image=image((nopy,), ref="bookworm-nopy")),
            TemplateSpec("appuser", image=image((bookworm, app), user="app")),
        ):
            await runtime.add_template(spec)
        yield runtime
    finally:
        await runtime.close()
