"""Environments: a template to run sandboxes from, and the warm width declared for it.

:func:`environment` is what ``client.env(ref, width=...)`` calls (the package
hands it to the wire layer, see :mod:`collimate_rl.wire._environments`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from collimate_rl.errors import CollimateNotFoundError, GatewayError
from collimate_rl.sandbox import AsyncSandbox, Sandbox
from collimate_rl.templates._clients import (
    _is_gateway,
    _looks_like_image,
    _no_node_bake,
    _not_gateway,
    image_template_id,
)
from collimate_rl.templates._handles import (
    AsyncTemplate,
    AsyncTemplateHandle,
    Template,
    TemplateHandle,
)
from collimate_rl.templates._ready import Ready
from collimate_rl.templates._status import TemplateStatus
from collimate_rl.wire._operations import ClientCall, Op, adrive, drive, field_of

__all__ = ["AsyncEnv", "Env", "environment", "environment_async"]


def _find_row(rows: Any, ref: str) -> Any:
    if isinstance(rows, Mapping):
        rows = field_of(rows, "images") or field_of(rows, "templates") or []
    items = list(rows or [])
    for key in ("id", "name"):
        for row in items:
            if field_of(row, key) == ref:
                return row
    return None


def _environment_op(
    client: Any,
    ref: str,
    *,
    width: int | None,
    name: str | None,
    ready: Ready | Mapping[str, Any] | None,
    env: Mapping[str, str] | None,
) -> Op[tuple[str, bool]]:
    """Resolve ``ref``; returns ``(template_id, releasable)`` (see :func:`environment`)."""
    has_overrides = bool(ready) or bool(env)
    if not _is_gateway(client):
        if has_overrides:
            raise _no_node_bake(client)
        if callable(getattr(client, "templates", None)):
            served = [str(t) for t in (yield ClientCall("templates"))]
            if ref not in served and _looks_like_image(ref) and hasattr(client, "bake_template"):
                # an image reference: our node makes it a template once, then reuses it
                tid = image_template_id(ref)
                if tid not in served:
                    yield ClientCall("bake_template", (tid, []), {"image": ref})
                return tid, False
            if ref not in served:
                raise CollimateNotFoundError(
                    f"this node has no template {ref!r}; it serves {served}. Pick one of "
                    "those, or connect to the gateway to bake your own",
                    status=404,
                    error_code="no_template",
                )
        return ref, False
    row = None
    if not (width is None and not has_overrides and name is not None):
        row = _find_row((yield ClientCall("images")), ref)
    public = row is not None and field_of(row, "visibility") == "public"
    row_id = str(field_of(row, "id", "") or "") if row is not None else ""
    if not has_overrides and (public or width is None):
        return row_id or ref, False
    if has_overrides and public:
        resp = yield ClientCall(
            "create_template",
            (),
            {
                "name": name or ref,
                "image": str(field_of(row, "image", "") or ref),
                "ready": ready,
                "env": env,
                "width": int(width) if width is not None else 1,
                "expected_width": int(width) if width is not None else None,
            },
        )
        tid = str(field_of(resp, "id", "") or "")
        if not tid:
            raise GatewayError(f"create_template for {ref!r} returned no id: {resp!r}")
        return tid, True
    tid = row_id or ref
    if width is not None:
        yield ClientCall("expect_width", (tid, int(width)))
    return tid, width is not None


def _release_op(template_id: str) -> Op[None]:
    try:
        yield ClientCall("release_template", (template_id,))
    except Exception:
        return  # best effort: idle decay (about an hour) is the safety net


class _EnvBase:
    def __init__(
        self,
        client: Any,
        template_id: str,
        *,
        ref: str = "",
        releasable: bool = False,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        self.client = client
        self.id = template_id
        self.ref = ref or template_id
        self.releasable = releasable
        self.secret_refs = list(secret_refs) if secret_refs else None
        self._released = False

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id!r}, ref={self.ref!r}, releasable={self.releasable})"
        )

    def _sandbox_kwargs(
        self,
        label: str | None,
        egress: Mapping[str, Any] | None,
        default_timeout: int,
        secret_refs: Sequence[str] | None,
        kwargs: Mapping[str, Any],
    ) -> dict[str, Any]:
        secrets = [*(self.secret_refs or ()), *(secret_refs or ())] or None
        return {
            "client": self.client,
            "egress": egress,
            "default_timeout": default_timeout,
            "label": label,
            "secret_refs": secrets,
            **kwargs,
        }

    def _check_gateway(self) -> None:
        if not _is_gateway(self.client):
            raise _not_gateway(self.id)

    def _take_release(self) -> bool:
        """Whether this call must release (at most once, only when declared)."""
        if not self.releasable or self._released:
            return False
        self._released = True
        return True


class Env(_EnvBase):
    """A template to run sandboxes from, and the warm width declared for it.

    Made by :func:`environment`. A context manager: on exit a width that was
    declared (``releasable``) is released, at most once, errors swallowed
    (idle decay is the safety net).

    Attributes:
        client: the client sandboxes are made with.
        id: the template id.
        ref: what the caller asked for.
        releasable: whether a width was declared (or a bake made) here.
        secret_refs: secrets given to every sandbox (gateway).

    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> with environment(ShellClient(), "python3", width=8) as env:
    ...     with env.sandbox() as box:
    ...         box.exec(command="echo ok").stdout
    'ok\\n'
    """

    def sandbox(
        self,
        *,
        label: str | None = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        secret_refs: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> Sandbox:
        """A :class:`~collimate_rl.sandbox.Sandbox` on this template (not started).

        Secrets are the env's plus ``secret_refs``; labels and secrets need the
        gateway. Other keyword arguments go to :class:`Sandbox`.
        """
        options = self._sandbox_kwargs(label, egress, default_timeout, secret_refs, kwargs)
        return Sandbox(self.id, **options)

    def status(self) -> TemplateStatus:
        """The template's status (gateway only)."""
        self._check_gateway()
        return Template.status(self.client, self.id)

    def wait(self, timeout: float = 600.0, **kwargs: Any) -> TemplateStatus:
        """Wait for the template to converge (see :meth:`TemplateHandle.wait`)."""
        self._check_gateway()
        return TemplateHandle(self.client, self.id).wait(timeout, **kwargs)

    def release(self) -> None:
        """Release the declared width: at most once, only if declared; never raises."""
        if self._take_release():
            drive(_release_op(self.id), self.client)

    def __enter__(self) -> Env:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class AsyncEnv(_EnvBase):
    """The async twin of :class:`Env` (made by :func:`environment_async`)."""

    def sandbox(
        self,
        *,
        label: str | None = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        secret_refs: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> AsyncSandbox:
        """See :meth:`Env.sandbox`; returns an (unstarted) :class:`AsyncSandbox`."""
        options = self._sandbox_kwargs(label, egress, default_timeout, secret_refs, kwargs)
        return AsyncSandbox(self.id, **options)

    async def status(self) -> TemplateStatus:
        """See :meth:`Env.status`."""
        self._check_gateway()
        return await AsyncTemplate.status(self.client, self.id)

    async def wait(self, timeout: float = 600.0, **kwargs: Any) -> TemplateStatus:
        """See :meth:`Env.wait`."""
        self._check_gateway()
        return await AsyncTemplateHandle(self.client, self.id).wait(timeout, **kwargs)

    async def release(self) -> None:
        """See :meth:`Env.release`."""
        if self._take_release():
            await adrive(_release_op(self.id), self.client)

    async def __aenter__(self) -> AsyncEnv:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


def environment(
    client: Any,
    ref: str,
    *,
    width: int | None = None,
    name: str | None = None,
    ready: Ready | Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    secrets: Sequence[str] | None = None,
) -> Env:
    """Resolve ``ref`` to an :class:`Env`: inherit, declare a width, or bake.

    What ``client.env(ref, width=..., ...)`` does. On the gateway:

    1. a public catalog image and no overrides (``ready``/``env``): inherit
       its shared pool (no bake, no declaration; ``width`` is a hint);
    2. no width and no overrides: a plain handle on ``ref`` (or the matching
       row; the catalog is not read when ``name`` is given);
    3. overrides on a public catalog image: bake a private template with a
       pool of ``width`` (default 1) and release it on exit;
    4. an owned template or raw id: declare ``width`` (if given) with
       ``expect_width`` and release it on exit; overrides are ignored.

    On the local node or a daemon the template must exist (built in, or baked
    before with :meth:`Template.bake`): the result is a plain handle and ``width``
    is only a hint; ``ready``/``env`` overrides are refused there (bake first).

    ``secrets`` become the env's ``secret_refs``; they never reach a bake.

    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> env = environment(ShellClient(), "python3", width=32)
    >>> env.id, env.releasable
    ('python3', False)

    Raises:
        CollimateNotFoundError: (node) the node does not serve ``ref``.
        CollimateUsageError: (node) overrides, which need a bake.
    """
    op = _environment_op(client, ref, width=width, name=name, ready=ready, env=env)
    tid, releasable = drive(op, client)
    return Env(client, tid, ref=ref, releasable=releasable, secret_refs=secrets)


async def environment_async(
    client: Any,
    ref: str,
    *,
    width: int | None = None,
    name: str | None = None,
    ready: Ready | Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    secrets: Sequence[str] | None = None,
) -> AsyncEnv:
    """The async twin of :func:`environment` (for ``AsyncGatewayClient`` / ``AsyncCollimateClient``)."""
    op = _environment_op(client, ref, width=width, name=name, ready=ready, env=env)
    tid, releasable = await adrive(op, client)
    return AsyncEnv(client, tid, ref=ref, releasable=releasable, secret_refs=secrets)
