"""A client of the OCI distribution API: manifests and blobs from a registry, over httpx.

Auth is what registries ask for: nothing, HTTP basic, or the bearer-token challenge
(``WWW-Authenticate: Bearer realm=...,service=...,scope=...``; the token is fetched from
the realm, with basic credentials when we have some, and cached per scope). Plain HTTP
is used only for a loopback registry or one named in ``insecure_registries``.

Blobs stream into the store's partial file; an interrupted download resumes with a
``Range`` request where the registry honours it, and restarts where it does not.
The store verifies the digest before it commits a blob.

>>> from collimate_rl.node.images.reference import parse_reference
>>> client = RegistryClient(insecure_registries=["build-box:5000"])
>>> ref = parse_reference("build-box:5000/team/app:v1")
>>> client.base_url(ref), client.base_url(parse_reference("127.0.0.1:5055/a"))
('http://build-box:5000', 'http://127.0.0.1:5055')
>>> client.base_url(parse_reference("python"))
'https://registry-1.docker.io'
>>> client.close()
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import BinaryIO, Final

import httpx

from collimate_rl.node.images.credentials import Credentials, find_credentials
from collimate_rl.node.images.errors import (
    DigestMismatch,
    ImageNotFound,
    ImagePullError,
    RegistryAuthError,
    RegistryError,
)
from collimate_rl.node.images.manifest import (
    ACCEPT_MANIFESTS,
    MAX_MANIFEST_BYTES,
    Descriptor,
    verify_digest,
)
from collimate_rl.node.images.reference import RegistryReference, parse_digest
from collimate_rl.node.images.seam import BlobSink

__all__ = ["RegistryClient", "parse_challenge"]

# Consecutive failures without a byte of progress before a blob download gives up.
_MAX_STALLS: Final = 4
_CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z_][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)\s*,?')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """Split a ``WWW-Authenticate`` value into its scheme and parameters.

    >>> parse_challenge('Bearer realm="https://a/token",service="reg",scope="repository:x:pull,push"')
    ('bearer', {'realm': 'https://a/token', 'service': 'reg', 'scope': 'repository:x:pull,push'})
    """
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    for match in _CHALLENGE_PARAM.finditer(rest):
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params[match.group(1).lower()] = value
    return scheme.lower(), params


class RegistryClient:
    """Fetches manifests and blobs; one client may serve many registries and repositories.

    Args:
        insecure_registries: ``host`` or ``host:port`` names to speak plain HTTP to (loopback
            registries always are).
        auth: credentials to use for every registry this client talks to; ``None`` reads them
            from the docker and podman credential files.
        env: the environment to find credential files with (``os.environ`` by default).
        timeout_s: connect and read timeout of each request.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        *,
        insecure_registries: Iterable[str] = (),
        auth: Credentials | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._insecure = frozenset(h.lower() for h in insecure_registries)
        self._auth = auth
        self._env = env
        self._found: dict[tuple[str, str], Credentials | None] = {}
        # the Authorization header to send per (registry, repository), and tokens per scope
        self._authorization: dict[tuple[str, str], str] = {}
        self._tokens: dict[tuple[str, str, str], str] = {}
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=True,
            transport=transport,
            headers={"User-Agent": "collimate-rl-node"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def base_url(self, ref: RegistryReference) -> str:
        """``http(s)://host[:port]`` of the registry's API."""
        host = ref.api_host
        plain = _is_loopback(ref.hostname) or ref.registry.lower() in self._insecure
        plain = plain or ref.hostname.lower() in self._insecure
        return f"{'http' if plain else 'https'}://{host}"

    def manifest(self, ref: RegistryReference, reference: str | None = None) -> bytes:
        """The manifest (or index) named by ``reference`` (a tag or digest; the ref's own by
        default), its bytes checked against the digest when one names it.

        Raises:
            ImageNotFound: no such repository, tag or digest.
            DigestMismatch: the bytes do not hash to the digest asked for or announced.
        """
        reference = reference or ref.manifest_reference
        url = f"{self.base_url(ref)}/v2/{ref.repository}/manifests/{reference}"
        response = self._send(ref, url, {"Accept": ACCEPT_MANIFESTS}, what=f"image {ref}")
        try:
            raw = _read_capped(response, MAX_MANIFEST_BYTES, what=f"the manifest of {ref}")
        except httpx.TransportError as exc:
            raise _Unreachable(f"reading the manifest of {ref} failed: {exc!r}") from exc
        finally:
            response.close()
        if reference.startswith(("sha256:", "sha512:")):
            verify_digest(raw, reference, what=f"manifest of {ref}")
        announced = response.headers.get("Docker-Content-Digest", "")
        if announced.startswith("sha256:"):
            verify_digest(raw, announced, what=f"manifest of {ref}")
        return raw

    def blob_bytes(self, ref: RegistryReference, desc: Descriptor, *, max_bytes: int) -> bytes:
        """A small blob (an image config) in memory, checked against its digest."""
        if desc.size > max_bytes:
            raise ImagePullError(
                f"{desc.digest} is {desc.size} bytes; a config is under {max_bytes}"
            )
        response = self._send(ref, self._blob_url(ref, desc.digest), {}, what=f"blob {desc.digest}")
        try:
            raw = _read_capped(response, max_bytes, what=f"blob {desc.digest}")
        except httpx.TransportError as exc:
            raise _Unreachable(
                f"reading {desc.digest} from {ref.registry} failed: {exc!r}"
            ) from exc
        finally:
            response.close()
        verify_digest(raw, desc.digest, what=f"config of {ref}")
        return raw

    def copy_blob(
        self,
        ref: RegistryReference,
        desc: Descriptor,
        store: BlobSink,
        on_progress: Callable[[int], None] | None = None,
    ) -> int:
        """Stream a blob into the store, resuming what an earlier attempt left; commit it.

        ``on_progress`` gets the bytes of this blob on disk so far. Returns the bytes
        received over the network by this call.

        Raises:
            DigestMismatch: the blob does not hash to its digest (the store drops it).
            RegistryError: the download kept failing without progress.
        """
        url = self._blob_url(ref, desc.digest)
        received = [0]
        stalls = 0
        handle, have = store.open_partial(desc.digest)
        try:
            while have != desc.size:
                if have > desc.size:
                    handle.truncate(0)
                    have = 0
                before = have
                try:
                    have = self._download(ref, url, desc, handle, have, received, on_progress)
                except (httpx.TransportError, _Unreachable) as exc:
                    handle.flush()
                    have = handle.seek(0, os.SEEK_END)
                    stalls = 0 if have > before else stalls + 1
                    if stalls >= _MAX_STALLS:
                        raise RegistryError(
                            f"downloading {desc.digest} from {ref.registry} failed {stalls} times "
                            f"in a row ({exc}); the partial download is kept, pull again to resume"
                        ) from exc
                    time.sleep(min(0.2 * stalls, 2.0))
        finally:
            handle.close()
        store.commit_partial(desc.digest)
        return received[0]

    def _download(
        self,
        ref: RegistryReference,
        url: str,
        desc: Descriptor,
        handle: BinaryIO,
        have: int,
        received: list[int],
        on_progress: Callable[[int], None] | None,
    ) -> int:
        """One GET of the blob from ``have`` on; returns the bytes on disk after it."""
        headers = {"Range": f"bytes={have}-"} if have else {}
        response = self._send(ref, url, headers, what=f"blob {desc.digest}", ok=(200, 206, 416))
        try:
            if response.status_code == 416 or (
                response.status_code == 206
                and not response.headers.get("Content-Range", "").startswith(f"bytes {have}-")
            ):
                handle.truncate(0)  # a range the registry will not serve: start over
                return 0
            if response.status_code == 200 and have:
                handle.truncate(0)  # the registry ignored Range and sent it all
                have = 0
            # unbuffered: bytes reach the partial file as they arrive, so a cut keeps them
            for chunk in response.iter_bytes():
                if have + len(chunk) > desc.size:
                    handle.truncate(0)
                    raise DigestMismatch(desc.digest, "(more bytes than its size)", what="blob")
                handle.write(chunk)
                have += len(chunk)
                received[0] += len(chunk)
                if on_progress is not None:
                    on_progress(have)
            handle.flush()
        finally:
            response.close()
        if have < desc.size:
            raise httpx.RemoteProtocolError(f"the blob stream ended at {have} of {desc.size}")
        return have

    def _blob_url(self, ref: RegistryReference, digest: str) -> str:
        parse_digest(digest)
        return f"{self.base_url(ref)}/v2/{ref.repository}/blobs/{digest}"

    def _send(
        self,
        ref: RegistryReference,
        url: str,
        headers: dict[str, str],
        *,
        what: str,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        """GET with the registry's auth; the caller closes the (streamed) response."""
        key = (ref.registry, ref.repository)
        for attempt in range(3):
            sent = dict(headers)
            if key in self._authorization:
                sent["Authorization"] = self._authorization[key]
            response = self._get(ref, url, sent)
            if response.status_code == 401 and attempt == 0:
                challenge = response.headers.get("WWW-Authenticate", "")
                response.close()
                # a token we sent that no longer works (expired): fetch a new one
                stale = sent.get("Authorization", "")
                self._tokens = {k: t for k, t in self._tokens.items() if f"Bearer {t}" != stale}
                self._authorization[key] = self._answer(ref, challenge)
                continue
            if response.status_code in (502, 503, 504) and attempt < 2:
                response.close()
                time.sleep(0.5 * (attempt + 1))
                continue
            if response.status_code in ok:
                return response
            response.read()
            response.close()
            _raise_for(response, ref, what)
        raise RegistryError(f"{ref.registry} kept failing for {what}")  # pragma: no cover

    def _get(self, ref: RegistryReference, url: str, headers: dict[str, str]) -> httpx.Response:
        try:
            return self._http.send(
                self._http.build_request("GET", url, headers=headers), stream=True
            )
        except httpx.ConnectError as exc:
            hint = ""
            if url.startswith("https:"):
                hint = f"; if {ref.registry} speaks plain HTTP, name it in --insecure-registry"
            raise _Unreachable(
                f"cannot reach the registry at {url.split('/v2/')[0]}: {exc}{hint}"
            ) from exc
        except httpx.TransportError as exc:
            raise _Unreachable(f"the registry {ref.registry} failed to answer: {exc!r}") from exc

    def _credentials(self, ref: RegistryReference) -> Credentials | None:
        if self._auth is not None:
            return self._auth
        key = (ref.registry, ref.repository)
        if key not in self._found:
            self._found[key] = find_credentials(ref.registry, ref.repository, env=self._env)
        return self._found[key]

    def _answer(self, ref: RegistryReference, challenge: str) -> str:
        """The Authorization header that answers a 401's challenge."""
        scheme, params = parse_challenge(challenge)
        creds = self._credentials(ref)
        if scheme == "basic":
            if creds is None:
                raise RegistryAuthError(_login_hint(ref, "asks for a user name and password"))
            return _basic(creds)
        if scheme != "bearer" or not params.get("realm"):
            raise RegistryAuthError(
                f"{ref.registry} asks for an auth scheme we do not speak: {challenge!r}"
            )
        scope = params.get("scope") or f"repository:{ref.repository}:pull"
        cache_key = (params["realm"], params.get("service", ""), scope)
        if cache_key not in self._tokens:
            self._tokens[cache_key] = self._fetch_token(ref, params, scope, creds)
        return f"Bearer {self._tokens[cache_key]}"

    def _fetch_token(
        self, ref: RegistryReference, params: dict[str, str], scope: str, creds: Credentials | None
    ) -> str:
        query = {"scope": scope}
        if params.get("service"):
            query["service"] = params["service"]
        realm = httpx.URL(params["realm"])
        if creds is not None and realm.scheme != "https":
            host = realm.host or ""
            if not (_is_loopback(host) or host in self._insecure):
                # a registry on HTTPS must not lead our password to a plain-HTTP realm
                raise RegistryAuthError(
                    f"{ref.registry} sends us to {params['realm']} for a token over plain HTTP; "
                    "refusing to send credentials there (name the host in --insecure-registry "
                    "if that is intended)"
                )
        headers = {"Authorization": _basic(creds)} if creds is not None else {}
        try:
            response = self._http.get(params["realm"], params=query, headers=headers)
        except httpx.HTTPError as exc:
            raise RegistryAuthError(
                f"cannot reach the token service {params['realm']}: {exc}"
            ) from exc
        if response.status_code in (401, 403):
            if creds is None:
                raise RegistryAuthError(_login_hint(ref, "gives no anonymous access"))
            raise RegistryAuthError(
                f"the token service of {ref.registry} refused the credentials of "
                f"{creds.username!r}: check the user name and password (docker/podman login)"
            )
        try:
            body = response.json()
            token = body.get("token") or body.get("access_token")
        except ValueError:
            token = None
        if response.status_code != 200 or not isinstance(token, str) or not token:
            raise RegistryAuthError(
                f"the token service {params['realm']} answered {response.status_code} without a token"
            )
        return token


class _Unreachable(RegistryError):
    """The connection failed (refused, reset, timed out): worth another try for a blob."""


def _raise_for(response: httpx.Response, ref: RegistryReference, what: str) -> None:
    status = response.status_code
    detail = response.text[:300]
    if status == 404:
        raise ImageNotFound(
            f"{what} not found on {ref.registry} (check the name, tag or digest): {detail}"
        )
    if status in (401, 403):
        creds = "no credentials" if status == 401 else "credentials"
        raise RegistryAuthError(
            f"{ref.registry} denied {what} ({status}; {creds} sent): log in with docker/podman "
            f"login or pass credentials, and check you may pull {ref.repository}. {detail}"
        )
    if status == 429:
        raise RegistryError(
            f"{ref.registry} is rate-limiting pulls (429): log in, or wait and retry"
        )
    raise RegistryError(f"{ref.registry} answered {status} for {what}: {detail}")


def _read_capped(response: httpx.Response, limit: int, *, what: str) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > limit:
            raise ImagePullError(f"{what} is larger than {limit} bytes; refusing it")
    return bytes(data)


def _basic(creds: Credentials) -> str:
    raw = f"{creds.username}:{creds.password}".encode()
    return "Basic " + base64.b64encode(raw).decode()


def _login_hint(ref: RegistryReference, problem: str) -> str:
    return (
        f"{ref.registry} {problem} for {ref.repository}: log in with `docker login "
        f"{ref.registry}` or `podman login` (read from $REGISTRY_AUTH_FILE, "
        "~/.docker/config.json), or pass credentials"
    )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
