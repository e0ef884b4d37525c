"""The async twin of :class:`~collimate_rl.sandbox.Sandbox`: the same operations, awaited."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from collimate_rl.sandbox._files import download_flow, upload_flow
from collimate_rl.sandbox._forkgroup import AsyncForkGroup, ChildInfo
from collimate_rl.sandbox._operations import _SandboxCore
from collimate_rl.sandbox._result import ExecResult
from collimate_rl.seeds import group_seeds
from collimate_rl.wire import connect_async
from collimate_rl.wire._operations import adrive

__all__ = ["AsyncSandbox"]


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
            client=client if client is not None else connect_async(),
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
    ) -> AsyncForkGroup[AsyncSandbox]:
        """See :meth:`Sandbox.fork_group`."""
        seeds = group_seeds(n, seed_mode, base_seed) if isinstance(n, int) else []
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
