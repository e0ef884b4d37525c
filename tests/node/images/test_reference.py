"""Image references: every form, the Docker Hub rules, bad input, a canonical round trip."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from collimate_rl.node.images.errors import ImageReferenceError
from collimate_rl.node.images.reference import (
    DockerArchiveReference,
    LayoutReference,
    RegistryReference,
    parse_digest,
    parse_reference,
)

D = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python", RegistryReference("docker.io", "library/python", "latest")),
        ("python:3.12-slim", RegistryReference("docker.io", "library/python", "3.12-slim")),
        ("user/img", RegistryReference("docker.io", "user/img", "latest")),
        ("docker.io/python", RegistryReference("docker.io", "library/python", "latest")),
        ("index.docker.io/user/img:1", RegistryReference("docker.io", "user/img", "1")),
        ("docker://python:3", RegistryReference("docker.io", "library/python", "3")),
        ("localhost/app", RegistryReference("localhost", "app", "latest")),
        ("localhost:5000/a/b/c:v1", RegistryReference("localhost:5000", "a/b/c", "v1")),
        ("127.0.0.1:5055/deb/py:1", RegistryReference("127.0.0.1:5055", "deb/py", "1")),
        ("[::1]:5000/app:x", RegistryReference("[::1]:5000", "app", "x")),
        ("ghcr.io/org/app@" + D, RegistryReference("ghcr.io", "org/app", None, D)),
        ("ghcr.io/org/app:v2@" + D, RegistryReference("ghcr.io", "org/app", "v2", D)),
        ("python@" + D, RegistryReference("docker.io", "library/python", None, D)),
        (
            "my_org/some-app__x.y:T_1.0-rc",
            RegistryReference("docker.io", "my_org/some-app__x.y", "T_1.0-rc"),
        ),
        ("oci:/srv/layout", LayoutReference("oci", "/srv/layout", None)),
        ("oci:layout:v1", LayoutReference("oci", "layout", "v1")),
        ("oci-archive:/tmp/a.tar:latest", LayoutReference("oci-archive", "/tmp/a.tar", "latest")),
        ("docker-archive:/tmp/s.tar", DockerArchiveReference("/tmp/s.tar")),
        ("docker-archive:s.tar:app:v1", DockerArchiveReference("s.tar", "app:v1")),
    ],
)
def test_every_form_parses(text: str, expected: object) -> None:
    assert parse_reference(text) == expected


def test_registry_properties() -> None:
    hub = parse_reference("python:3.12-slim")
    assert isinstance(hub, RegistryReference)
    assert hub.api_host == "registry-1.docker.io" and hub.hostname == "docker.io"
    assert hub.manifest_reference == "3.12-slim"
    local = parse_reference("127.0.0.1:5055/deb/py@" + D)
    assert isinstance(local, RegistryReference)
    assert local.api_host == "127.0.0.1:5055" and local.hostname == "127.0.0.1"
    assert local.manifest_reference == D and str(local) == "127.0.0.1:5055/deb/py@" + D
    v6 = parse_reference("[::1]:5000/app")
    assert isinstance(v6, RegistryReference) and v6.hostname == "::1"


@pytest.mark.parametrize(
    "text",
    [
        "",
        " python",
        "Python",
        "python:",
        "python:-bad",
        "python:" + "x" * 129,
        "python@sha256:abc",
        "python@md5:" + "0" * 32,
        "python@sha256:" + "A" * 64,
        "a//b",
        "/abs",
        "app/",
        "ghcr.io/",
        "bad_host.io:99999/app",
        "-bad.io/app",
        "ftp://host/app",
        "oci:",
        "oci::tag",
        "oci:dir:",
        "oci-archive:",
        "docker-archive:",
        "docker-archive:f.tar:Bad Name",
        "docker://",
        "x" * 256,
        "py\0thon",
    ],
)
def test_bad_references_raise_a_typed_value_error(text: str) -> None:
    with pytest.raises(ImageReferenceError) as info:
        parse_reference(text)
    assert isinstance(info.value, ValueError) and str(info.value)


def test_a_non_string_is_refused() -> None:
    with pytest.raises(ImageReferenceError):
        parse_reference(None)  # type: ignore[arg-type]


def test_digests() -> None:
    assert parse_digest("sha512:" + "a" * 128) == ("sha512", "a" * 128)
    with pytest.raises(ImageReferenceError):
        parse_digest("sha256:" + "a" * 63)


_component = st.from_regex(r"[a-z0-9]{1,4}(?:(?:[._]|__|-+)[a-z0-9]{1,4}){0,2}", fullmatch=True)
_tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}", fullmatch=True)
_host = st.one_of(
    st.sampled_from(["docker.io", "localhost", "ghcr.io", "127.0.0.1", "[::1]"]),
    st.from_regex(r"[a-z0-9]{1,5}\.[a-z]{2,3}", fullmatch=True),
)
_digest = st.from_regex(r"sha256:[a-f0-9]{64}", fullmatch=True)


@given(
    host=st.one_of(st.none(), _host),
    port=st.one_of(st.none(), st.integers(1, 65535)),
    path=st.lists(_component, min_size=1, max_size=3),
    tag=st.one_of(st.none(), _tag),
    digest=st.one_of(st.none(), _digest),
    docker_scheme=st.booleans(),
)
def test_registry_references_round_trip_through_their_canonical_form(
    host: str | None,
    port: int | None,
    path: list[str],
    tag: str | None,
    digest: str | None,
    docker_scheme: bool,
) -> None:
    # Without a host, a first component with a dot is a host (Docker's rule), not a path.
    assume(host is not None or len(path) == 1 or "." not in path[0])
    text = "/".join(path)
    if host is not None:
        text = f"{host}:{port}/{text}" if port is not None else f"{host}/{text}"
    if tag is not None:
        text += f":{tag}"
    if digest is not None:
        text += f"@{digest}"
    ref = parse_reference(("docker://" if docker_scheme else "") + text)
    assert isinstance(ref, RegistryReference)
    assert parse_reference(str(ref)) == ref
    assert ref.tag == (tag if tag is not None or digest is not None else "latest")
    assert ref.digest == digest
    assert ref.repository.endswith("/".join(path))


@given(
    transport=st.sampled_from(["oci", "oci-archive", "docker-archive"]),
    path=st.from_regex(
        r"[/A-Za-z0-9._-](?:[/A-Za-z0-9._ -]{0,18}[/A-Za-z0-9._-])?", fullmatch=True
    ),
    tag=st.one_of(st.none(), _tag),
)
def test_local_references_round_trip(transport: str, path: str, tag: str | None) -> None:
    text = f"{transport}:{path}" + (f":{tag.lower()}" if tag is not None else "")
    try:
        ref = parse_reference(text)
    except ImageReferenceError:
        # docker-archive names are registry names: a tag alone may be an invalid one
        assert transport == "docker-archive"
        return
    assert parse_reference(str(ref)) == ref
    assert str(ref) == text
