"""Debian's docker-registry on 127.0.0.1, three ways: anonymous, htpasswd, a token realm.

The three share one storage directory, so an image pushed to the anonymous one is in all
three. The token realm is served by :class:`TokenIssuer`, a small issuer that signs JWTs
with a self-signed certificate's key and puts the certificate in the ``x5c`` header (what
registry 2.8 checks against its ``rootcertbundle``).
"""

from __future__ import annotations

import base64
import datetime
import json
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

USER, PASSWORD = "alice", "wonderland"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing_tools(*names: str) -> str | None:
    lacking = [name for name in names if shutil.which(name) is None]
    if lacking:
        return f"{', '.join(lacking)} not installed (apt-get install {' '.join(lacking)}; .ci/run does)"
    return None


class Registry:
    """A running docker-registry; ``host`` is ``127.0.0.1:PORT``."""

    def __init__(self, workdir: Path, storage: Path, auth: dict[str, Any] | None = None) -> None:
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.storage = storage
        workdir.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "error", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True}},
            "http": {"addr": self.host, "secret": "collimate-test"},
        }
        if auth:
            config["auth"] = auth
        config_path = workdir / "config.yml"
        config_path.write_text(json.dumps(config))  # YAML reads JSON
        self._log = (workdir / "registry.log").open("wb")
        self.process = subprocess.Popen(
            ["docker-registry", "serve", str(config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"http://{self.host}/v2/", timeout=1).status_code in (200, 401):
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"docker-registry did not start: {(workdir / 'registry.log').read_text()}"
                )
            time.sleep(0.1)

    def blob_file(self, digest: str) -> Path:
        hex_ = digest.split(":", 1)[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hex_[:2] / hex_ / "data"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def htpasswd_auth(workdir: Path) -> dict[str, Any]:
    import bcrypt

    path = workdir / "htpasswd"
    workdir.mkdir(parents=True, exist_ok=True)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=5)).decode()
    path.write_text(f"{USER}:{hashed}\n")
    return {"htpasswd": {"realm": "collimate-test", "path": str(path)}}


class TokenIssuer:
    """A token realm: Basic alice:wonderland gets a token for the scope asked; no credentials
    get one to pull ``public/*`` (as Docker Hub's anonymous pulls); others get 401."""

    service = "collimate-test-registry"
    issuer = "collimate-test-issuer"

    def __init__(self, workdir: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        workdir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "collimate test issuer")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.bundle = workdir / "issuer.pem"
        self.bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()
        self.realm = f"http://127.0.0.1:{self.port}/token"
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer._serve(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def auth_config(self) -> dict[str, Any]:
        return {
            "token": {
                "realm": self.realm,
                "service": self.service,
                "issuer": self.issuer,
                "rootcertbundle": str(self.bundle),
            }
        }

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlparse(handler.path).query)
        header = handler.headers.get("Authorization", "")
        user = None
        if header.startswith("Basic "):
            name, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            user = name if (name, secret) == (USER, PASSWORD) else None
        scope = query.get("scope", [""])[0]
        self.requests.append({"scope": scope, "user": user, "auth": bool(header)})
        public = scope.startswith("repository:public/") and scope.endswith(":pull")
        if user is None and not header and public:
            user = ""  # anonymous pulls of public/*, as Docker Hub grants them
        if user is None:
            handler.send_response(401)
            handler.end_headers()
            return
        access = []
        for scope in query.get("scope", []):
            kind, _, rest = scope.partition(":")
            repo, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": repo, "actions": actions.split(",")})
        body = json.dumps({"token": self._sign(user, access), "expires_in": 300}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _sign(self, user: str, access: list[dict[str, Any]]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [self._x5c]}
        claims = {
            "iss": self.issuer,
            "sub": user,
            "aud": self.service,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": base64.b16encode(now.to_bytes(8, "big")).decode(),
            "access": access,
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def skopeo_push(
    source: str, registry: Registry, name: str, *, all_platforms: bool = False, docker: bool = False
) -> str:
    """Push ``source`` (oci:DIR:tag, ...) to the registry as ``name``; returns the reference.

    As is (digests kept), or with ``docker`` converted to Docker's schema 2 media types.
    """
    dest = f"{registry.host}/{name}"
    command = ["skopeo", "--insecure-policy", "copy", "--dest-tls-verify=false", "-q"]
    command += ["--format", "v2s2"] if docker else ["--preserve-digests"]
    if all_platforms:
        command.append("--all")
    subprocess.run(
        [*command, source, f"docker://{dest}"], check=True, capture_output=True, timeout=120
    )
    return dest
