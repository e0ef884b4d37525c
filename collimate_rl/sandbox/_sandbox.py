"""The SDK's handle on one sandbox, over any transport (local node, daemon, gateway).

Everything a :class:`Sandbox` does is an operation in :class:`_SandboxCore`
(a generator of client calls, see :mod:`collimate_rl.sandbox._core`);
:class:`Sandbox` drives them with blocking calls and :class:`AsyncSandbox`
awaits them. The two classes hold no logic of their own.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.sandbox._core import ClientCall, Op, adrive, drive, field_of
from collimate_rl.sandbox._files import ScriptFlow, download_flow, upload_flow
from collimate_rl.sandbox._forkgroup import (
    AsyncForkGroup,
    ChildInfo,
    ForkGroup,
    check_fork_args,
    fork_kind,
    fork_op,
)
from collimate_rl.sandbox._result import ExecResult
from collimate_rl.seeds import group_seeds, is_valid_seed

__all__ = ["WARM_FORK_MS", "AsyncSandbox", "Sandbox"]

T = TypeVar("T")

#: A fork at most this slow (ms) was served from the warm pool.
WARM_FORK_MS: Final = 1.0


def _endpoints(resp: Any) -> dict[str, str]:
    raw = field_of(resp, "endpoints") or {}
    return {str(k): str(v) for k, v in dict(raw).items()}


class _SandboxCore:
    """State and operations shared by :class:`Sandbox` and :class:`AsyncSandbox`."""

    def __init__(
        self,
        template: str,
        *,
        client: Any,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        keep_on_error: bool = False,
        default_seed: str | None = None,
        label: str | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(template, str):
            raise CollimateUsageError(f"template must be a str, got {type(template).__name__}")
        if default_seed is not None and not is_valid_seed(default_seed):
            raise CollimateUsageError(
                f"default_seed must be 64 hex characters, got {default_seed!r}"
            )
        self.template = template
        self.client = client
        self.egress = dict(egress) if egress is not None else None
        self.default_timeout = default_timeout
        self.keep_on_error = keep_on_error
        self.default_seed = default_seed
        self.label = label
        self.secret_refs = list(secret_refs) if secret_refs else None
        self.session_id: str | None = None
        self.fork_time_ms: float | None = None
        self.endpoints: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(template={self.template!r}, session_id={self.session_id!r})"

    @property
    def warm_hit(self) -> bool:
        """Whether the fork was served from the warm pool (``0 <= fork_time_ms <= 1.0``)."""
        return self.fork_time_ms is not None and 0.0 <= self.fork_time_ms <= WARM_FORK_MS

    @property
    def started(self) -> bool:
        """Whether the sandbox holds a live session."""
        return self.session_id is not None

    # -- operations ------------------------------------------------------------

    def _attach_op(self, session_id: str) -> Op[None]:
        info = yield ClientCall("get_session", (session_id,))
        self.template = str(field_of(info, "template_id") or field_of(info, "template") or "")
        self.session_id = session_id

    def _start_op(self) -> Op[None]:
        if self.session_id is not None:
            return
        if self.label is not None or self.secret_refs:
            if not callable(getattr(self.client, "create_sandbox", None)):
                raise CollimateUsageError(
                    "label and secret_refs need the gateway transport (create_sandbox); "
                    f"{type(self.client).__name__} has neither"
                )
            options = {"label": self.label, "egress": self.egress, "secret_refs": self.secret_refs}
            resp = yield ClientCall("create_sandbox", (self.template,), options)
        else:
            resp = yield ClientCall("create_session", (self.template,), {"egress": self.egress})
        sid = field_of(resp, "session_id") or field_of(resp, "id")
        if not isinstance(sid, str) or not sid:
            raise CollimateError(f"create_session returned no session_id: {resp!r}")
        self.session_id = sid
        fork_ms = field_of(resp, "fork_time_ms", -1)
        self.fork_time_ms = float(fork_ms) if fork_ms is not None else -1.0
        self.endpoints = _endpoints(resp)

    def _close_op(self) -> Op[None]:
        sid, self.session_id = self.session_id, None
        if sid is None:
            return
        try:
            yield ClientCall("delete_session", (sid,))
        except Exception:
            return  # close never raises; the server's session TTL is the backstop

    def _exec_call(
        self,
        *,
        code: str | None,
        command: str | None,
        commands: Sequence[Sequence[str]] | None,
        files: Sequence[Mapping[str, str]] | None,
        timeout_seconds: int | None,
        seed: str | None,
    ) -> ClientCall:
        if self.session_id is None:
            raise CollimateUsageError("the sandbox is not started")
        kwargs: dict[str, Any] = {"timeout_seconds": timeout_seconds or self.default_timeout}
        for key, value in (
            ("command", command),
            ("code", code),
            ("commands", commands),
            ("files", files),
            ("seed", seed if seed is not None else self.default_seed),
        ):
            if value is not None:
                kwargs[key] = value
        return ClientCall("session_exec", (self.session_id,), kwargs)

    def _exec_op(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        seed: str | None = None,
    ) -> Op[ExecResult]:
        if code is None and command is None and commands is None:
            raise CollimateUsageError("one of command/code/commands is required")
        yield from self._start_op()
        call = self._exec_call(
            code=code,
            command=command,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
            seed=seed,
        )
        resp = yield call
        return ExecResult.from_response(resp)

    def _script_op(self, flow: ScriptFlow[T], timeout_seconds: int | None) -> Op[T]:
        """Run a script flow (upload/download): each script is one ``command`` exec."""
        try:
            yield from self._start_op()
        except Exception:
            flow.close()
            raise
        try:
            script = next(flow)
            while True:
                try:
                    resp = yield self._exec_call(
                        code=None,
                        command=script,
                        commands=None,
                        files=None,
                        timeout_seconds=timeout_seconds,
                        seed=None,
                    )
                except Exception as exc:
                    script = flow.throw(exc)
                else:
                    script = flow.send(ExecResult.from_response(resp))
        except StopIteration as stop:
            value: T = stop.value
            return value
        finally:
            flow.close()

    def _fork_op(
        self, n: int, *, labels: Sequence[str] | None, max_per_call: int | None
    ) -> Op[list[ChildInfo]]:
        kind = fork_kind(self.client)
        check_fork_args(kind, n, labels)  # before the parent is started
        yield from self._start_op()
        if self.session_id is None:  # for the type checker; _start_op sets it
            raise CollimateError("the sandbox has no session to fork")
        return (yield from fork_op(kind, self.session_id, n, cap=max_per_call, labels=labels))

    def _child_kwargs(self, seed: str | None, timeout: int | None) -> dict[str, Any]:
        return {
            "template": self.template,
            "default_timeout": timeout if timeout is not None else self.default_timeout,
            "keep_on_error": self.keep_on_error,
            "default_seed": seed,
        }

    def _adopt_child(self, child: _SandboxCore, info: ChildInfo) -> None:
        child.session_id = info.id
        child.fork_time_ms = info.fork_time_ms
        child.endpoints = dict(info.endpoints)
        child.egress = self.egress

    def _connect_url_op(self, port: int, ttl_seconds: int, protocol: str) -> Op[str]:
        if not callable(getattr(self.client, "connect_url", None)):
            raise CollimateError(
                "connect_url/cdp_url need the gateway transport (GatewayClient); "
                f"{type(self.client).__name__} has no host->guest ingress"
            )
        yield from self._start_op()
        resp = yield ClientCall(
            "connect_url",
            (self.session_id, port),
            {"ttl_seconds": ttl_seconds, "protocol": protocol},
        )
        return str(field_of(resp, "url", ""))


def _default_client(*, asynchronous: bool) -> Any:
    wire = importlib.import_module("collimate_rl.wire")
    if asynchronous:
        factory = getattr(wire, "connect_async", None) or getattr(wire, "aconnect", None)
        if factory is None:
            raise CollimateUsageError("pass client=... (an async client) to AsyncSandbox")
        return factory()
    return wire.connect()


def _fork_seeds(n: int, seed_mode: str, base_seed: str | None) -> list[str | None]:
    return group_seeds(n, seed_mode, base_seed)


class Sandbox(_SandboxCore):
    """A handle on one sandbox session over any transport; a context manager.

    Creating the handle sends nothing; :meth:`start` (or entering the ``with``
    block, or the first exec) creates the session, and :meth:`close` (or
    leaving the block, exceptions included) deletes it, unless the block
    raised and ``keep_on_error`` is set.

    Args:
        template: the template id to fork from (e.g. ``"python3"`` on the local node).
        client: any client with the daemon-parity surface (``CollimateClient``,
            ``GatewayClient``, the local node's client); default ``connect()``.
        egress: an egress policy for the session (networked templates only).
        default_timeout: guest timeout in seconds when an exec gives none.
        keep_on_error: leave the session alive when the ``with`` block raises.
        default_seed: the seed for execs that give none (64 hex characters).
        label: a label for the sandbox (gateway only).
        secret_refs: names of secrets to mount at create time (gateway only).

    Attributes:
        session_id: the live session's id, or ``None`` before start / after close.
        fork_time_ms: the create's fork time (``None`` for adopted sessions).
        endpoints: exposed ports of the session, ``{"<port>": "<host>:<port>"}``.

    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> with Sandbox("python3", client=ShellClient()) as box:
    ...     box.upload_bytes("data/blob.bin", b"\\x00\\x01no newline")
    ...     box.exec(command="wc -c < data/blob.bin").stdout
    ...     box.download("data/blob.bin")
    '12\\n'
    b'\\x00\\x01no newline'
    """

    def __init__(
        self,
        template: str,
        *,
        client: Any = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        keep_on_error: bool = False,
        default_seed: str | None = None,
        label: str | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            template,
            client=client if client is not None else _default_client(asynchronous=False),
            egress=egress,
            default_timeout=default_timeout,
            keep_on_error=keep_on_error,
            default_seed=default_seed,
            label=label,
            secret_refs=secret_refs,
        )

    @classmethod
    def attach(cls, client: Any, session_id: str, **kwargs: Any) -> Sandbox:
        """Adopt a live session after checking it exists (``get_session``).

        The template is taken from the session's info. A missing session
        raises the client's 404 (``no_such_session``) error. Closing the
        handle deletes the session.

        >>> from collimate_rl.sandbox._shell import ShellClient
        >>> client = ShellClient()
        >>> sid = client.create_session("python3")["session_id"]
        >>> box = Sandbox.attach(client, sid)
        >>> box.template, box.session_id == sid
        ('python3', True)
        """
        box = cls("", client=client, **kwargs)
        drive(box._attach_op(session_id), client)
        return box

    @classmethod
    def adopt(cls, client: Any, session_id: str, *, template: str = "", **kwargs: Any) -> Sandbox:
        """Adopt a session without checking it; a bad id surfaces at the first exec."""
        box = cls(template, client=client, **kwargs)
        box.session_id = session_id
        return box

    def start(self) -> Sandbox:
        """Create the session (a no-op when already started); returns ``self``."""
        drive(self._start_op(), self.client)
        return self

    def close(self) -> None:
        """Delete the session if there is one. Idempotent; never raises."""
        drive(self._close_op(), self.client)

    def reset(self) -> None:
        """Close, then start a fresh copy-on-write clone of the template."""
        self.close()
        self.start()

    def exec(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        seed: str | None = None,
    ) -> ExecResult:
        """Run code, a shell command or argv lists in the session (starting it if needed).

        A non-zero exit or a guest timeout (``exit_code == -1``) is data in the
        result; infrastructure failures raise. Note that ``files`` are written
        as text (and may gain a final newline on the real daemon): use
        :meth:`upload_bytes` for exact bytes.

        Args:
            code: source for the template's interpreter.
            command: a shell command line (wins over ``commands`` and ``code``).
            commands: argv lists.
            files: ``[{"path", "content"}]`` written before running.
            timeout_seconds: the guest timeout (default ``default_timeout``).
            seed: 64 hex characters (default ``default_seed``).
        """
        return drive(
            self._exec_op(
                code,
                command=command,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
                seed=seed,
            ),
            self.client,
        )

    def upload_bytes(
        self,
        path: str,
        data: bytes | bytearray | memoryview,
        *,
        timeout_seconds: int | None = None,
    ) -> None:
        """Write ``data`` to ``path`` in the sandbox, byte-exact, over exec alone.

        Verified in the sandbox by size and sha256 and moved into place
        atomically; a failed upload leaves the target untouched.

        Raises:
            TypeError: ``data`` is not bytes-like.
            CollimateTaskError: the sandbox could not write or verify the file.
        """
        drive(self._script_op(upload_flow(path, data), timeout_seconds), self.client)

    def download(
        self, path: str, *, timeout_seconds: int | None = None, max_bytes: int | None = None
    ) -> bytes:
        """Read ``path`` from the sandbox, byte-exact (any size: 11 MiB per exec).

        Raises:
            CollimateTaskError: no such file, over ``max_bytes``, or output that
                fails the framing, base64, size or sha256 checks.
        """
        return drive(
            self._script_op(download_flow(path, max_bytes=max_bytes), timeout_seconds),
            self.client,
        )

    def fork(
        self,
        n: int = 1,
        *,
        labels: Sequence[str] | None = None,
        max_per_call: int | None = None,
    ) -> list[Sandbox]:
        """Fork the session into exactly ``n`` child sandboxes (or none, on error).

        Children share the parent's template, timeout and seed; the caller
        owns and closes them. The parent should be quiescent while forking.
        """
        infos = drive(self._fork_op(n, labels=labels, max_per_call=max_per_call), self.client)
        return [self._child(info, self.default_seed, None) for info in infos]

    def fork_group(
        self,
        n: int,
        *,
        seed_mode: str = "crn",
        base_seed: str | None = None,
        labels: Sequence[str] | None = None,
        default_timeout: int | None = None,
        max_per_call: int | None = None,
    ) -> ForkGroup:
        """Fork into a :class:`ForkGroup` of exactly ``n`` children (strict width).

        Args:
            n: the width.
            seed_mode: how the children's default seeds relate (``crn``: one
                shared seed; ``vanilla``: none; ``deterministic``: a fixed one).
            base_seed: the seed ``crn``/``deterministic`` use.
            labels: one label per child (gateway only).
            default_timeout: the children's default timeout (default: the parent's).
            max_per_call: children per fork call (default: the gateway tier's
                cap, or :data:`NODE_FORK_MAX` on the local node).

        Raises:
            ForkShortError: a fork call returned fewer children (none are left).
        """
        seeds = _fork_seeds(n, seed_mode, base_seed) if isinstance(n, int) else []
        infos = drive(self._fork_op(n, labels=labels, max_per_call=max_per_call), self.client)
        children = [
            self._child(info, seed, default_timeout)
            for info, seed in zip(infos, seeds, strict=True)
        ]
        return ForkGroup(self, children, seeds)

    def _child(self, info: ChildInfo, seed: str | None, timeout: int | None) -> Sandbox:
        child = Sandbox(client=self.client, **self._child_kwargs(seed, timeout))
        self._adopt_child(child, info)
        return child

    def connect_url(self, port: int, *, ttl_seconds: int = 600, protocol: str = "tcp") -> str:
        """A URL reaching ``port`` inside the sandbox (gateway only)."""
        return drive(self._connect_url_op(port, ttl_seconds, protocol), self.client)

    def cdp_url(self, *, ttl_seconds: int = 600) -> str:
        """A Chrome DevTools URL for the browser in the sandbox (gateway only)."""
        return self.connect_url(9222, ttl_seconds=ttl_seconds, protocol="cdp")

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and self.keep_on_error:
            return
        self.close()


class AsyncSandbox(_SandboxCore):
    """The async twin of :class:`Sandbox`: the same operations, awaited.

    The client must be async (``AsyncCollimateClient``, ``AsyncGatewayClient``).

    >>> import anyio
    >>> from collimate_rl.sandbox._shell import AsyncShellClient
    >>> async def main():
    ...     async with AsyncSandbox("python3", client=AsyncShellClient()) as box:
    ...         await box.upload_bytes("x.bin", b"\\x00")
    ...         return await box.download("x.bin")
    >>> anyio.run(main)
    b'\\x00'
    """

    def __init__(
        self,
        template: str,
        *,
        client: Any = None,
        egress: Mapping[str, Any] | None = None,
        default_timeout: int = 60,
        keep_on_error: bool = False,
        default_seed: str | None = None,
        label: str | None = None,
        secret_refs: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            template,
            client=client if client is not None else _default_client(asynchronous=True),
            egress=egress,
            default_timeout=default_timeout,
            keep_on_error=keep_on_error,
            default_seed=default_seed,
            label=label,
            secret_refs=secret_refs,
        )

    @classmethod
    async def attach(cls, client: Any, session_id: str, **kwargs: Any) -> AsyncSandbox:
        """See :meth:`Sandbox.attach`."""
        box = cls("", client=client, **kwargs)
        await adrive(box._attach_op(session_id), client)
        return box

    @classmethod
    def adopt(
        cls, client: Any, session_id: str, *, template: str = "", **kwargs: Any
    ) -> AsyncSandbox:
        """See :meth:`Sandbox.adopt`."""
        box = cls(template, client=client, **kwargs)
        box.session_id = session_id
        return box

    async def start(self) -> AsyncSandbox:
        """See :meth:`Sandbox.start`."""
        await adrive(self._start_op(), self.client)
        return self

    async def aclose(self) -> None:
        """See :meth:`Sandbox.close`."""
        await adrive(self._close_op(), self.client)

    async def reset(self) -> None:
        """See :meth:`Sandbox.reset`."""
        await self.aclose()
        await self.start()

    async def exec(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        seed: str | None = None,
    ) -> ExecResult:
        """See :meth:`Sandbox.exec`."""
        return await adrive(
            self._exec_op(
                code,
                command=command,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
                seed=seed,
            ),
            self.client,
        )

    async def upload_bytes(
        self,
        path: str,
        data: bytes | bytearray | memoryview,
        *,
        timeout_seconds: int | None = None,
    ) -> None:
        """See :meth:`Sandbox.upload_bytes`."""
        await adrive(self._script_op(upload_flow(path, data), timeout_seconds), self.client)

    async def download(
        self, path: str, *, timeout_seconds: int | None = None, max_bytes: int | None = None
    ) -> bytes:
        """See :meth:`Sandbox.download`."""
        return await adrive(
            self._script_op(download_flow(path, max_bytes=max_bytes), timeout_seconds),
            self.client,
        )

    async def fork(
        self,
        n: int = 1,
        *,
        labels: Sequence[str] | None = None,
        max_per_call: int | None = None,
    ) -> list[AsyncSandbox]:
        """See :meth:`Sandbox.fork`."""
        op = self._fork_op(n, labels=labels, max_per_call=max_per_call)
        infos = await adrive(op, self.client)
        return [self._child(info, self.default_seed, None) for info in infos]

    async def fork_group(
        self,
        n: int,
        *,
        seed_mode: str = "crn",
        base_seed: str | None = None,
        labels: Sequence[str] | None = None,
        default_timeout: int | None = None,
        max_per_call: int | None = None,
    ) -> AsyncForkGroup:
        """See :meth:`Sandbox.fork_group`."""
        seeds = _fork_seeds(n, seed_mode, base_seed) if isinstance(n, int) else []
        op = self._fork_op(n, labels=labels, max_per_call=max_per_call)
        infos = await adrive(op, self.client)
        children = [
            self._child(info, seed, default_timeout)
            for info, seed in zip(infos, seeds, strict=True)
        ]
        return AsyncForkGroup(self, children, seeds)

    def _child(self, info: ChildInfo, seed: str | None, timeout: int | None) -> AsyncSandbox:
        child = AsyncSandbox(client=self.client, **self._child_kwargs(seed, timeout))
        self._adopt_child(child, info)
        return child

    async def connect_url(self, port: int, *, ttl_seconds: int = 600, protocol: str = "tcp") -> str:
        """See :meth:`Sandbox.connect_url`."""
        return await adrive(self._connect_url_op(port, ttl_seconds, protocol), self.client)

    async def cdp_url(self, *, ttl_seconds: int = 600) -> str:
        """See :meth:`Sandbox.cdp_url`."""
        return await self.connect_url(9222, ttl_seconds=ttl_seconds, protocol="cdp")

    async def __aenter__(self) -> AsyncSandbox:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and self.keep_on_error:
            return
        await self.aclose()
