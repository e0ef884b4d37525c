"""The image config (OCI ``application/vnd.oci.image.config.v1+json`` or Docker's) as data.

Only what the node honours is kept: the environment, working directory, user,
entrypoint and command, exposed ports, the platform and the layers' diff ids.
Docker's and the OCI's config blobs share these keys, so one parser reads both.

>>> cfg = ImageConfig.parse(b'''{"architecture": "amd64", "os": "linux",
...   "config": {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"], "WorkingDir": "/app",
...              "Cmd": ["python3"], "ExposedPorts": {"8000/tcp": {}}},
...   "rootfs": {"type": "layers", "diff_ids": ["sha256:%s"]}}''' % (b"0" * 64))
>>> cfg.env_dict()["LANG"], cfg.working_dir, cfg.cmd, cfg.exposed_ports
('C.UTF-8', '/app', ('python3',), (8000,))
>>> ImageConfig.parse(json.dumps(cfg.to_json()).encode()) == cfg
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collimate_rl.node.images.errors import ImageConfigError

__all__ = ["ImageConfig"]


@dataclass(frozen=True)
class ImageConfig:
    """What the node honours of an image config.

    Attributes:
        env: ``(name, value)`` pairs in the image's order; a later duplicate wins.
        working_dir: the process's working directory; ``""`` when the image sets none.
        user: ``"name"``, ``"uid"``, ``"uid:gid"`` or ``""`` (the image's default, root).
        entrypoint: the entrypoint argv; empty when unset.
        cmd: the command argv (arguments to the entrypoint when both are set).
        exposed_ports: TCP and UDP port numbers the image declares, sorted, unique.
        architecture: GOARCH-style (``amd64``, ``arm64``); ``""`` when unset.
        os: ``linux`` for every image the node runs; ``""`` when unset.
        diff_ids: digests of the uncompressed layers, lowest first.
    """

    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    user: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    exposed_ports: tuple[int, ...] = ()
    architecture: str = ""
    os: str = ""
    diff_ids: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: bytes | str | Mapping[str, Any]) -> ImageConfig:
        """Read a config blob (bytes or str of JSON) or its decoded object.

        Raises:
            ImageConfigError: not JSON, or a field of the wrong type.
        """
        doc = _load(raw)
        inner = doc.get("config")
        if inner is None:
            inner = {}
        if not isinstance(inner, Mapping):
            raise ImageConfigError("image config: 'config' must be an object")
        rootfs = doc.get("rootfs") or {}
        if not isinstance(rootfs, Mapping):
            raise ImageConfigError("image config: 'rootfs' must be an object")
        return cls(
            env=_env(inner.get("Env")),
            working_dir=_string(inner, "WorkingDir"),
            user=_string(inner, "User"),
            entrypoint=_strings(inner.get("Entrypoint"), "Entrypoint"),
            cmd=_strings(inner.get("Cmd"), "Cmd"),
            exposed_ports=_ports(inner.get("ExposedPorts")),
            architecture=_string(doc, "architecture"),
            os=_string(doc, "os"),
            diff_ids=_strings(rootfs.get("diff_ids"), "rootfs.diff_ids"),
        )

    def env_dict(self) -> dict[str, str]:
        """The environment as a dict (a later duplicate wins, as in a shell)."""
        return dict(self.env)

    def to_json(self) -> dict[str, Any]:
        """An OCI config object that :meth:`parse` reads back to an equal value.

        The store keeps this beside an image's record so a restart needs no re-parse
        of the original blob; ports come back as ``"N/tcp"``.
        """
        inner: dict[str, Any] = {"Env": [f"{k}={v}" for k, v in self.env]}
        if self.working_dir:
            inner["WorkingDir"] = self.working_dir
        if self.user:
            inner["User"] = self.user
        if self.entrypoint:
            inner["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            inner["Cmd"] = list(self.cmd)
        if self.exposed_ports:
            inner["ExposedPorts"] = {f"{p}/tcp": {} for p in self.exposed_ports}
        return {
            "architecture": self.architecture,
            "os": self.os,
            "config": inner,
            "rootfs": {"type": "layers", "diff_ids": list(self.diff_ids)},
        }


def _load(raw: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return raw
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImageConfigError(f"image config is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ImageConfigError("image config must be a JSON object")
    return doc


def _string(doc: Mapping[str, Any], key: str) -> str:
    value = doc.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ImageConfigError(f"image config: {key!r} must be a string, not {value!r}")
    return value


def _strings(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    # Docker once allowed a bare string for Cmd/Entrypoint (the shell form is an argv by now).
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageConfigError(f"image config: {key!r} must be a list of strings")
    return tuple(value)


def _env(value: object) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, str] = {}
    for entry in _strings(value, "Env"):
        name, sep, val = entry.partition("=")
        if not name or "\0" in entry:
            raise ImageConfigError(f"image config: bad Env entry {entry!r}")
        # "NAME" without "=" is how Docker spells an empty value.
        pairs[name] = val if sep else ""
    return tuple(pairs.items())


def _ports(value: object) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ImageConfigError("image config: 'ExposedPorts' must be an object")
    ports: set[int] = set()
    for key in value:
        number, _, proto = str(key).partition("/")
        if not number.isdigit() or not 0 < int(number) < 65536 or proto not in ("", "tcp", "udp"):
            raise ImageConfigError(f"image config: bad exposed port {key!r}")
        ports.add(int(number))
    return tuple(sorted(ports))
