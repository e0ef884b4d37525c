"""Fixtures of the image tests: the three registries (one storage), a store per test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from collimate_rl.node.images.store import ImageStore
from tests.node.images._registry import Registry, TokenIssuer, htpasswd_auth, missing_tools


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
