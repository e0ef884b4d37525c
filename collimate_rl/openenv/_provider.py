"""``CollimateProvider``: OpenEnv's container provider, backed by a Collimate sandbox.

.. code-block:: python

    from openenv.core import GenericEnvClient
    from collimate_rl.openenv import CollimateProvider

    provider = CollimateProvider(client)       # a node or gateway client
    env = await GenericEnvClient.from_docker_image("echo-env", provider=provider)
    result = await env.reset()
    await env.close()                          # deletes the sandbox

The "image" is a template whose sessions run the env server on ``port``
(8000, OpenEnv's convention): on the local node, a template baked with
``Ready(cmd=..., ports=[8000], http="/health")`` (see docs/services.md); on
the gateway, one built with ``EXPOSE_PORTS`` / ``Ready.ports``. On our local node
an OCI image reference that names no template (``registry/env-server:1``,
``oci:DIR:tag``) becomes one: the node pulls it and serves its ``Entrypoint``/``Cmd``
on ``port``, ready when ``/health`` answers (once per reference and port).

How the server is reached:

* daemon or local node: the create response's ``endpoints["8000"]``
  (``"host:port"``, reachable from the node's host; our node serves it only to
  its own user and root, so run the trainer as the node's user);
* gateway: a connect URL (``POST /v1/sandboxes/{id}/connect-url``) and a
  local :class:`~collimate_rl.openenv._tunnel.PortForward` (serving only this
  process's uid and root), so ``base_url`` is a plain ``http://127.0.0.1:<port>``.

Every failure after the sandbox exists (no endpoint, a tunnel that cannot
start, a server that never answers ``/health``) deletes it before the error
propagates; :meth:`CollimateProvider.stop_container` is idempotent, and a
finalizer deletes a sandbox whose provider was dropped or outlived the
interpreter. OpenEnv's ``from_docker_image`` does not stop the provider when
its WebSocket connect fails: :meth:`CollimateProvider.launch` does.
"""

from __future__ import annotations

import inspect
import logging
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from openenv.core.containers.runtime.providers import ContainerProvider

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.openenv._tunnel import PortForward
from collimate_rl.templates._clients import _looks_like_image, image_template_id
from collimate_rl.wire._operations import field_of

__all__ = ["CollimateProvider", "image_to_template"]

logger = logging.getLogger("collimate_rl.openenv")

#: OpenEnv's container convention: the env server listens on 8000.
DEFAULT_PORT = 8000
#: Lifetime of a minted connect URL (the gateway's maximum).
CONNECT_URL_TTL = 3600

ClientT = TypeVar("ClientT")


def image_to_template(image: str) -> str:
    """The template id an image name stands for.

    ``snapshot:<id>`` is ``<id>``; otherwise the last path segment without a
    digest or tag.

    >>> image_to_template("ghcr.io/org/echo-env:latest")
    'echo-env'
    >>> image_to_template("snapshot:tpl-123"), image_to_template("echo@sha256:ab")
    ('tpl-123', 'echo')
    """
    if image.startswith("snapshot:"):
        return image[len("snapshot:") :]
    name = image.rsplit("/", 1)[-1].split("@", 1)[0]
    return name.split(":", 1)[0] if ":" in name else name


def _no_proxy_opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _reap(client: Any, session_id: str, forward: PortForward | None) -> None:
    """Delete a sandbox and stop its tunnel; never raises (also the finalizer)."""
    if forward is not None:
        try:
            forward.close()
        except Exception as exc:  # pragma: no cover - best effort
            logger.warning("closing the tunnel of %s failed: %s", session_id, exc)
    try:
        client.delete_session(session_id)
    except Exception as exc:
        logger.warning("deleting sandbox %s failed: %s", session_id, exc)


class CollimateProvider(ContainerProvider):  # type: ignore[misc]
    """An OpenEnv ``ContainerProvider`` that runs the env server in a Collimate sandbox.

    Manages one sandbox at a time, like every OpenEnv provider.

    Args:
        client: a blocking client (:func:`collimate_rl.connect`'s result: a
            daemon client over TCP or a unix socket, or a ``GatewayClient``).
            ``None``: the process's shared local node (the one the
            ``collimate_envs`` envs use).
        port: the server's port inside the sandbox when ``start_container``
            gets none.
        ready_timeout: seconds ``start_container`` waits for ``GET /health``.
        template_for_image: maps an image name to a template id: a dict or a
            callable; default :func:`image_to_template`.

    >>> CollimateProvider(client=object()).session_id is None
    True
    """

    def __init__(
        self,
        client: Any = None,
        *,
        port: int = DEFAULT_PORT,
        ready_timeout: float = 60.0,
        template_for_image: Mapping[str, str] | Callable[[str], str] | None = None,
    ) -> None:
        self._client = client
        self.port = int(port)
        self.ready_timeout = float(ready_timeout)
        self._resolve = template_for_image
        self._session_id: str | None = None
        self._base_url: str | None = None
        self._forward: PortForward | None = None
        self._finalizer: weakref.finalize[Any, CollimateProvider] | None = None

    # -- properties ------------------------------------------------------

    @property
    def client(self) -> Any:
        """The Collimate client (the shared local node's when none was given)."""
        if self._client is None:
            from collimate_envs._backend import shared_local_client

            self._client = shared_local_client()
        return self._client

    @property
    def session_id(self) -> str | None:
        """The running sandbox's id, or ``None``."""
        return self._session_id

    @property
    def base_url(self) -> str | None:
        """The env server's URL while a sandbox runs."""
        return self._base_url

    # -- the ContainerProvider contract -----------------------------------

    def template_for(self, image: str) -> str:
        """The template id ``image`` names (see ``template_for_image``)."""
        if self._resolve is None:
            return image_to_template(image)
        if callable(self._resolve):
            return str(self._resolve(image))
        try:
            return str(self._resolve[image])
        except KeyError:
            raise CollimateUsageError(
                f"no template for image {image!r}; known: {sorted(self._resolve)}"
            ) from None

    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """Create a sandbox of ``image``'s template and return its server's ``http://`` URL.

        Raises ``CollimateUsageError`` for ``env_vars`` (a template's
        environment is fixed when it is baked: use ``Ready(env=...)``, or pass
        per-episode settings to ``reset``), the client's typed error when the
        create fails, ``CollimateError`` when the template exposes no such
        port, ``TimeoutError`` when the server does not answer ``/health`` in
        ``ready_timeout``. The sandbox is deleted on every failure.
        """
        if env_vars:
            raise CollimateUsageError(
                "env_vars cannot be set per container: a template's environment is fixed "
                "when it is baked (Ready(env={...})); pass per-episode settings to reset()"
            )
        if kwargs:
            raise CollimateUsageError(f"unknown start_container options: {sorted(kwargs)}")
        template = self.template_for(image)
        port = int(port or self.port)
        client = self.client
        if inspect.iscoroutinefunction(getattr(client, "create_session", None)):
            raise CollimateUsageError(
                "CollimateProvider needs a blocking client (OpenEnv calls providers "
                "synchronously); pass CollimateClient/GatewayClient, not the async twins"
            )
        self.stop_container()
        template = self._image_template(client, image, template, port)
        resp = client.create_session(template)
        session_id = str(field_of(resp, "session_id") or field_of(resp, "id") or "")
        if not session_id:
            raise CollimateError(f"create_session({template!r}) returned no session id: {resp!r}")
        self._session_id = session_id
        self._finalizer = weakref.finalize(self, _reap, client, session_id, None)
        try:
            self._base_url = self._connect(client, session_id, template, port, resp)
            self.wait_for_ready(self._base_url, timeout_s=self.ready_timeout)
        except BaseException:
            self.stop_container()
            raise
        return self._base_url

    def _image_template(self, client: Any, image: str, template: str, port: int) -> str:
        """On our node, the template an OCI image reference becomes (baked on first use);
        else ``template`` unchanged (a gateway's, a daemon's, or one the node serves)."""
        if (
            self._resolve is not None
            or not callable(getattr(client, "bake_template", None))
            or callable(getattr(client, "expect_width", None))
            or not _looks_like_image(image)
        ):
            return template
        served = [str(t) for t in client.templates()]
        if template in served or image in served:
            return template if template in served else image
        tid = f"{image_template_id(image)}-{port}"
        if tid not in served:
            ready = {"ports": [port], "http": "/health", "http_timeout_s": self.ready_timeout}
            client.bake_template(tid, [], image=image, ready=ready)
        return tid

    def _connect(self, client: Any, session_id: str, template: str, port: int, resp: Any) -> str:
        if callable(getattr(client, "connect_url", None)):  # the gateway: tunnel
            self._forward = PortForward(
                lambda: str(
                    field_of(
                        client.connect_url(session_id, port, ttl_seconds=CONNECT_URL_TTL), "url"
                    )
                ),
                ttl_seconds=CONNECT_URL_TTL,
            )
            assert self._finalizer is not None
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _reap, client, session_id, self._forward)
            self._forward.fresh_url()  # mint now: an unexposed port fails here, not later
            return self._forward.start().url
        endpoints = field_of(resp, "endpoints") or {}
        address = endpoints.get(str(port)) if isinstance(endpoints, Mapping) else None
        if not address:
            raise CollimateError(
                f"template {template!r} exposes no port {port} (endpoints: {dict(endpoints)}); "
                f"bake it with Ready(cmd=<server>, ports=[{port}], http='/health')"
            )
        address = str(address)
        return address if address.startswith(("http://", "https://")) else f"http://{address}"

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        """Poll ``GET {base_url}/health`` until it answers 200; ``TimeoutError`` past ``timeout_s``."""
        url = base_url.rstrip("/") + "/health"
        opener = _no_proxy_opener()
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while True:
            try:
                with opener.open(url, timeout=2.0) as reply:
                    if reply.status == 200:
                        return
                    last = f"HTTP {reply.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"env server at {base_url} not ready within {timeout_s:g}s (last: {last})"
                )
            time.sleep(0.05)

    def stop_container(self) -> None:
        """Stop the tunnel and delete the sandbox. Idempotent; never raises."""
        session_id, forward, finalizer = self._session_id, self._forward, self._finalizer
        self._session_id = self._base_url = None
        self._forward = self._finalizer = None
        if finalizer is not None:
            finalizer.detach()
        if session_id is not None:
            _reap(self.client, session_id, forward)
        elif forward is not None:
            forward.close()

    # -- conveniences ----------------------------------------------------

    close = stop_container

    def __enter__(self) -> CollimateProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_container()

    async def launch(self, client_cls: type[ClientT], image: str, **kwargs: Any) -> ClientT:
        """``client_cls.from_docker_image(image, provider=self)``, reaping the sandbox if it fails.

        OpenEnv's own ``from_docker_image`` leaves the container running when
        its WebSocket connect fails; this stops it first.
        """
        try:
            env: ClientT = await client_cls.from_docker_image(  # type: ignore[attr-defined]
                image, provider=self, **kwargs
            )
        except BaseException:
            self.stop_container()
            raise
        return env
