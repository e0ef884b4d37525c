"""Registry credentials, read where docker and podman keep them.

Files, first match wins: ``$REGISTRY_AUTH_FILE``; podman's
``$XDG_RUNTIME_DIR/containers/auth.json`` and ``~/.config/containers/auth.json``;
docker's ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``. In each, ``auths``
maps a registry (``host[:port]``, a URL such as Docker Hub's ``https://index.docker.io/v1/``,
or podman's ``host/namespace`` for one part of a registry) to base64 ``user:pass`` in
``auth``, or ``username`` and ``password``.

>>> import base64, tempfile
>>> blob = base64.b64encode(b"me:secret").decode()
>>> with tempfile.TemporaryDirectory() as d:
...     _ = Path(d, "config.json").write_text(
...         json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": blob}}}))
...     find_credentials("docker.io", "library/python", env={"DOCKER_CONFIG": d, "HOME": d})
Credentials(username='me', password=***)
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from collimate_rl.node.images.errors import RegistryAuthError
from collimate_rl.node.images.reference import DOCKER_HUB

__all__ = ["Credentials", "auth_files", "find_credentials"]

_HUB_KEYS = ("docker.io", "index.docker.io", "registry-1.docker.io")


@dataclass(frozen=True)
class Credentials:
    """A user name and password (or token) for one registry."""

    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:
        # never print a secret into a log or a traceback
        return f"Credentials(username={self.username!r}, password=***)"


def auth_files(env: Mapping[str, str] | None = None) -> list[Path]:
    """The credential files to look in, in order (existing or not)."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    files: list[Path] = []
    if env.get("REGISTRY_AUTH_FILE"):
        files.append(Path(env["REGISTRY_AUTH_FILE"]))
    if env.get("XDG_RUNTIME_DIR"):
        files.append(Path(env["XDG_RUNTIME_DIR"], "containers", "auth.json"))
    files.append(Path(env.get("XDG_CONFIG_HOME") or home / ".config", "containers", "auth.json"))
    files.append(Path(env.get("DOCKER_CONFIG") or home / ".docker", "config.json"))
    return files


def find_credentials(
    registry: str, repository: str, *, env: Mapping[str, str] | None = None
) -> Credentials | None:
    """The credentials stored for ``registry`` (``docker.io`` for Docker Hub), or ``None``.

    A ``host/namespace`` key (podman) beats a plain ``host`` key in the same file.

    Raises:
        RegistryAuthError: a credential file that exists but cannot be read.
    """
    for path in auth_files(env):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RegistryAuthError(f"cannot read the credential file {path}: {exc}") from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise RegistryAuthError(f"the credential file {path} is not JSON: {exc}") from exc
        auths = doc.get("auths") if isinstance(doc, dict) else None
        if not isinstance(auths, dict):
            continue
        entries = {_normalise_key(key): value for key, value in auths.items()}
        for key in _keys_for(registry, repository):
            if key in entries:
                return _decode(entries[key], path, key)
    return None


def _keys_for(registry: str, repository: str) -> Iterator[str]:
    # most specific first: host/a/b, host/a, host
    parts = repository.split("/")
    for end in range(len(parts), 0, -1):
        yield f"{registry}/{'/'.join(parts[:end])}"
    yield registry


def _normalise_key(key: str) -> str:
    for scheme in ("https://", "http://"):
        if key.startswith(scheme):
            key = key[len(scheme) :]
            # a URL key names a whole registry (https://index.docker.io/v1/)
            key = key.split("/", 1)[0]
    key = key.rstrip("/")
    host, slash, path = key.partition("/")
    if host in _HUB_KEYS:
        host = DOCKER_HUB
    return host + slash + path


def _decode(entry: object, path: Path, key: str) -> Credentials | None:
    if not isinstance(entry, dict):
        return None
    username, password = entry.get("username"), entry.get("password")
    if isinstance(username, str) and isinstance(password, str) and username:
        return Credentials(username, password)
    encoded = entry.get("auth")
    if not isinstance(encoded, str) or not encoded:
        # an entry kept by a credential helper (credsStore) holds no secret here
        return None
    try:
        user, sep, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise RegistryAuthError(f"{path}: the 'auth' of {key!r} is not base64 user:pass") from exc
    if not sep or not user:
        raise RegistryAuthError(f"{path}: the 'auth' of {key!r} is not base64 user:pass")
    return Credentials(user, secret)
