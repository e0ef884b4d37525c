"""The image config parser: Docker's and the OCI's keys, bad input, a round trip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.node.images.config import ImageConfig
from collimate_rl.node.images.errors import ImageConfigError, ImageError

DIGEST = "sha256:" + "ab" * 32


def test_a_docker_config_with_nulls_parses_to_empty_fields() -> None:
    raw = {
        "architecture": "arm64",
        "os": "linux",
        "config": {"Env": None, "Entrypoint": None, "Cmd": None, "User": "", "WorkingDir": ""},
        "rootfs": {"type": "layers", "diff_ids": [DIGEST]},
    }
    cfg = ImageConfig.parse(json.dumps(raw).encode())
    assert cfg == ImageConfig(architecture="arm64", os="linux", diff_ids=(DIGEST,))


def test_every_honoured_field_is_read() -> None:
    raw = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/bin", "A=1=2", "EMPTY", "A=3"],
            "WorkingDir": "/srv",
            "User": "1000:1000",
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": ["serve --port 8000"],
            "ExposedPorts": {"8000/tcp": {}, "53/udp": {}, "8000": {}},
        },
    }
    cfg = ImageConfig.parse(json.dumps(raw))
    assert cfg.env == (("PATH", "/usr/bin"), ("A", "3"), ("EMPTY", ""))
    assert cfg.working_dir == "/srv" and cfg.user == "1000:1000"
    assert cfg.entrypoint == ("/bin/sh", "-c") and cfg.cmd == ("serve --port 8000",)
    assert cfg.exposed_ports == (53, 8000)
    assert cfg.diff_ids == ()


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"config": []}',
        b'{"config": {"Env": "A=1"}}'.replace(b'"A=1"', b"3"),
        b'{"config": {"Env": ["=x"]}}',
        b'{"config": {"Cmd": [1]}}',
        b'{"config": {"WorkingDir": 5}}',
        b'{"config": {"ExposedPorts": {"http/tcp": {}}}}',
        b'{"config": {"ExposedPorts": {"70000/tcp": {}}}}',
        b'{"config": {"ExposedPorts": {"80/sctp": {}}}}',
        b'{"rootfs": {"diff_ids": "sha256:x"}}'.replace(b'"sha256:x"', b"{}"),
        b'{"architecture": 1}',
    ],
)
def test_malformed_configs_raise_a_typed_error(raw: bytes) -> None:
    with pytest.raises(ImageConfigError) as info:
        ImageConfig.parse(raw)
    assert isinstance(info.value, ImageError) and isinstance(info.value, ValueError)


_text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)
_name = st.text(
    st.characters(blacklist_characters="=\0", blacklist_categories=("Cs",)), min_size=1, max_size=8
)


@given(
    env=st.dictionaries(_name, _text, max_size=4),
    working_dir=_text,
    user=_text,
    entrypoint=st.lists(_text, max_size=3),
    cmd=st.lists(_text, max_size=3),
    ports=st.sets(st.integers(1, 65535), max_size=3),
    diff_ids=st.lists(st.just(DIGEST), max_size=2),
)
def test_to_json_round_trips(
    env: dict[str, str],
    working_dir: str,
    user: str,
    entrypoint: list[str],
    cmd: list[str],
    ports: set[int],
    diff_ids: list[str],
) -> None:
    cfg = ImageConfig(
        env=tuple(env.items()),
        working_dir=working_dir,
        user=user,
        entrypoint=tuple(entrypoint),
        cmd=tuple(cmd),
        exposed_ports=tuple(sorted(ports)),
        architecture="amd64",
        os="linux",
        diff_ids=tuple(diff_ids),
    )
    assert ImageConfig.parse(json.dumps(cfg.to_json()).encode()) == cfg
