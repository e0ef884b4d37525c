"""The distribution client's small parts: challenges, schemes, credential files, status mapping."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from collimate_rl.node.images.credentials import Credentials, auth_files, find_credentials
from collimate_rl.node.images.distribution import RegistryClient, parse_challenge
from collimate_rl.node.images.errors import (
    DigestMismatch,
    ImageNotFound,
    RegistryAuthError,
    RegistryError,
)
from collimate_rl.node.images.reference import RegistryReference, parse_reference


def _reg(text: str) -> RegistryReference:
    ref = parse_reference(text)
    assert isinstance(ref, RegistryReference)
    return ref


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ('Basic realm="Registry Realm"', ("basic", {"realm": "Registry Realm"})),
        (
            'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
            'scope="repository:library/python:pull"',
            (
                "bearer",
                {
                    "realm": "https://auth.docker.io/token",
                    "service": "registry.docker.io",
                    "scope": "repository:library/python:pull",
                },
            ),
        ),
        (
            'Bearer realm="a\\"b", error=insufficient_scope',
            ("bearer", {"realm": 'a"b', "error": "insufficient_scope"}),
        ),
    ],
)
def test_challenges_parse(header: str, expected: tuple[str, dict[str, str]]) -> None:
    assert parse_challenge(header) == expected


@pytest.mark.parametrize(
    ("ref", "insecure", "scheme"),
    [
        ("127.0.0.1:5000/a", (), "http"),
        ("127.9.9.9/a", (), "http"),
        ("[::1]:5000/a", (), "http"),
        ("localhost:5000/a", (), "http"),
        ("10.0.0.5:5000/a", (), "https"),
        ("build-box:5000/a", (), "https"),
        ("build-box:5000/a", ("build-box:5000",), "http"),
        ("build-box:5000/a", ("build-box",), "http"),
        ("build-box:5000/a", ("other:5000",), "https"),
        ("python", (), "https"),
    ],
)
def test_plain_http_only_for_loopback_or_named_registries(
    ref: str, insecure: tuple[str, ...], scheme: str
) -> None:
    with RegistryClient(insecure_registries=insecure) as client:
        assert client.base_url(_reg(ref)).startswith(f"{scheme}://")


def _write(path: Path, auths: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": auths}))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_credential_files_in_order_and_the_most_specific_key(tmp_path: Path) -> None:
    auth_file = _write(
        tmp_path / "auth.json",
        {"reg.io/team": {"auth": _b64("team:t")}, "reg.io": {"auth": _b64("all:a")}},
    )
    _write(
        tmp_path / "docker" / "config.json",
        {"reg.io": {"auth": _b64("docker:d")}, "other.io": {"auth": _b64("o:o")}},
    )
    env = {
        "REGISTRY_AUTH_FILE": str(auth_file),
        "DOCKER_CONFIG": str(tmp_path / "docker"),
        "HOME": str(tmp_path),
    }
    assert find_credentials("reg.io", "team/app", env=env) == Credentials("team", "t")
    assert find_credentials("reg.io", "solo/app", env=env) == Credentials("all", "a")
    assert find_credentials("other.io", "x", env=env) == Credentials("o", "o")
    assert find_credentials("missing.io", "x", env=env) is None
    assert auth_files(env)[0] == auth_file


@pytest.mark.parametrize(
    "key", ["https://index.docker.io/v1/", "docker.io", "index.docker.io", "registry-1.docker.io"]
)
def test_docker_hub_keys(tmp_path: Path, key: str) -> None:
    _write(tmp_path / ".docker" / "config.json", {key: {"username": "me", "password": "pw"}})
    assert find_credentials(
        "docker.io", "library/python", env={"HOME": str(tmp_path)}
    ) == Credentials("me", "pw")


def test_a_helper_entry_holds_no_secret_and_bad_entries_raise(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    path = _write(tmp_path / ".docker" / "config.json", {"reg.io": {}})
    assert find_credentials("reg.io", "a", env=env) is None
    _write(path, {"reg.io": {"auth": "!!!not base64"}})
    with pytest.raises(RegistryAuthError, match="not base64"):
        find_credentials("reg.io", "a", env=env)
    _write(path, {"reg.io": {"auth": _b64("no-colon")}})
    with pytest.raises(RegistryAuthError):
        find_credentials("reg.io", "a", env=env)
    path.write_text("{not json")
    with pytest.raises(RegistryAuthError, match="not JSON"):
        find_credentials("reg.io", "a", env=env)


def test_credentials_never_print_the_password() -> None:
    assert "hunter2" not in repr(Credentials("me", "hunter2"))


def _client(handler: httpx.MockTransport) -> RegistryClient:
    return RegistryClient(transport=handler, env={"HOME": "/nonexistent"})


@pytest.mark.parametrize(
    ("status", "error", "text"),
    [
        (404, ImageNotFound, "not found"),
        (403, RegistryAuthError, "denied"),
        (429, RegistryError, "rate-limiting"),
        (500, RegistryError, "500"),
    ],
)
def test_statuses_map_to_typed_errors(status: int, error: type[Exception], text: str) -> None:
    # rate limits and server faults cannot be provoked from the real registry here
    transport = httpx.MockTransport(lambda request: httpx.Response(status, text="{}"))
    with _client(transport) as client, pytest.raises(error, match=text):
        client.manifest(_reg("reg.example/app:v1"))


def test_an_unreachable_https_registry_suggests_insecure_registry() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with (
        _client(httpx.MockTransport(refuse)) as client,
        pytest.raises(RegistryError, match="--insecure-registry"),
    ):
        client.manifest(_reg("reg.example:5000/app:v1"))


def test_an_unknown_auth_scheme_is_an_auth_error() -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(401, headers={"WWW-Authenticate": "Negotiate"})
    )
    with _client(transport) as client, pytest.raises(RegistryAuthError, match="do not speak"):
        client.manifest(_reg("reg.example/app:v1"))


def test_credentials_are_not_sent_to_a_plain_http_realm() -> None:
    asked: list[str] = []

    def registry(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        challenge = 'Bearer realm="http://auth.example/token",service="reg"'
        return httpx.Response(401, headers={"WWW-Authenticate": challenge})

    client = RegistryClient(transport=httpx.MockTransport(registry), auth=Credentials("me", "pw"))
    with client, pytest.raises(RegistryAuthError, match="plain HTTP"):
        client.manifest(_reg("reg.example/app:v1"))
    assert all(not url.startswith("http://auth.example") for url in asked)


def test_a_manifest_that_is_not_its_announced_digest_is_refused() -> None:
    body = b'{"schemaVersion": 2}'
    announced = "sha256:" + "0" * 64
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=body, headers={"Docker-Content-Digest": announced}
        )
    )
    with _client(transport) as client, pytest.raises(DigestMismatch):
        client.manifest(_reg("reg.example/app:v1"))
    # pinned by digest: the bytes must hash to the pin, whatever the headers say
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with _client(transport) as client, pytest.raises(DigestMismatch):
        client.manifest(_reg("reg.example/app@" + announced))


def test_a_connection_reset_is_a_registry_error_not_an_httpx_one() -> None:
    def reset(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("connection reset by peer", request=request)

    with _client(httpx.MockTransport(reset)) as client, pytest.raises(RegistryError, match="reset"):
        client.manifest(_reg("reg.example/app:v1"))
