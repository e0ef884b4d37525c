"""Strict-width forking and the group of forked children.

:func:`fork_op` forks a parent ``n`` ways as one operation (see
:mod:`collimate_rl.wire._operations`): on the gateway through
``fork(sandbox_id, count=, labels=)`` in chunks of the tier's per-call cap,
on the local node through its ``fork_session(session_id, count)`` extension.
The width is strict: either all ``n`` children exist, or none do. On any
failure (an error, a short or oversized answer, a child without an id) every
child created so far is deleted and the error re-raised.

:class:`ForkGroup` and :class:`AsyncForkGroup` hold the children and run
the same exec on each (``exec_each``) or any function per child (``map``),
with results in child order.

>>> op = fork_op("node", "ses_1", 3, cap=2)
>>> next(op)
ClientCall(method='fork_session', args=('ses_1', 2), kwargs={})
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

import anyio

from collimate_rl.errors import (
    CollimateError,
    CollimateUsageError,
    ForkShortError,
    GatewayError,
)
from collimate_rl.sandbox._drive_batched import adrive_batched, drive_batched
from collimate_rl.sandbox._result import ExecResult
from collimate_rl.wire._extensions import has_batch_route
from collimate_rl.wire._operations import ClientCall, Op, field_of, to_dict

__all__ = [
    "NODE_FORK_MAX",
    "AsyncForkGroup",
    "ChildInfo",
    "ForkGroup",
    "fork_op",
]


class _ExecOps(Protocol):
    """What both group flavours need of a child to send the group's execs in one request."""

    client: Any

    def _exec_op(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
    ) -> Op[ExecResult]: ...


class Member(_ExecOps, Protocol):
    """What a :class:`ForkGroup` needs of a child (a :class:`~collimate_rl.sandbox.Sandbox`)."""

    def exec(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
    ) -> ExecResult: ...

    def close(self) -> None: ...


class AsyncMember(_ExecOps, Protocol):
    """What an :class:`AsyncForkGroup` needs of a child (an ``AsyncSandbox``)."""

    async def exec(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
    ) -> ExecResult: ...

    async def aclose(self) -> None: ...


T = TypeVar("T")
S = TypeVar("S")
# The children's type; the sandbox module names it (``ForkGroup[Sandbox]``), so
# this module, which the sandbox module imports, need not import it back.
M = TypeVar("M", bound=Member)
AM = TypeVar("AM", bound=AsyncMember)

#: The most children the local node forks in one call (its ``MAX_FORK_COUNT``).
NODE_FORK_MAX: Final = 256

InfraMode = Literal["raise", "none"]


@dataclass(frozen=True)
class ChildInfo:
    """One forked child as the server reported it.

    Attributes:
        id: the child's session (sandbox) id.
        fork_time_ms: its fork time, or ``None`` when not reported.
        endpoints: exposed ports, ``{"<port>": "<host>:<port>"}``.
        raw: the child's entry in the fork response.
    """

    id: str
    fork_time_ms: float | None = None
    endpoints: Mapping[str, str] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


def fork_kind(client: Any) -> Literal["gateway", "node"]:
    """Which fork call ``client`` offers: the gateway's ``fork`` or the node's ``fork_session``."""
    if callable(getattr(client, "fork", None)):
        return "gateway"
    if callable(getattr(client, "fork_session", None)):
        return "node"
    raise CollimateError(
        f"{type(client).__name__} cannot fork: forking needs the gateway (GatewayClient.fork) "
        "or the local node's fork extension (fork_session); the plain daemon has neither"
    )


def _child_info(child: Any) -> ChildInfo | None:
    """The child as reported, or ``None`` when it has no usable id."""
    cid = field_of(child, "id") or field_of(child, "session_id")
    if not isinstance(cid, str) or not cid:
        return None
    fork_ms = field_of(child, "fork_time_ms")
    endpoints = field_of(child, "endpoints") or {}
    return ChildInfo(
        id=cid,
        fork_time_ms=float(fork_ms) if isinstance(fork_ms, (int, float)) else None,
        endpoints={str(k): str(v) for k, v in dict(endpoints).items()},
        raw=to_dict(child),
    )


def check_fork_args(
    client_kind: Literal["gateway", "node"], n: int, labels: Sequence[str] | None
) -> None:
    """Raise :class:`CollimateUsageError` for a bad width or labels (before any call)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CollimateUsageError(f"n must be a positive int, got {n!r}")
    if labels is not None and (isinstance(labels, str) or len(labels) != n):
        raise CollimateUsageError(f"labels must be None or a list of exactly n={n} labels")
    if labels is not None and client_kind != "gateway":
        raise CollimateUsageError("fork labels are a gateway feature; the local node has none")


def fork_op(
    client_kind: Literal["gateway", "node"],
    parent_id: str,
    n: int,
    *,
    cap: int | None = None,
    labels: Sequence[str] | None = None,
) -> Op[list[ChildInfo]]:
    """Fork ``parent_id`` into exactly ``n`` children, or into none.

    Args:
        client_kind: ``"gateway"`` (``fork(id, count=, labels=)``) or ``"node"``
            (``fork_session(id, count)``); see :func:`fork_kind`.
        parent_id: the session to fork; it should be quiescent.
        n: how many children (>= 1).
        cap: children per call (``ceil(n / cap)`` calls, in sequence); ``None``:
            the tier's cap on the gateway, :data:`NODE_FORK_MAX` on the node.
        labels: ``None`` or exactly ``n`` labels (gateway only).

    Raises:
        CollimateUsageError: a bad ``n``, ``cap`` or ``labels``.
        ForkShortError: a call returned a different number of children.
        CollimateError: a child without an id, or any error of the calls.
    """
    check_fork_args(client_kind, n, labels)
    error_cls = GatewayError if client_kind == "gateway" else CollimateError
    if client_kind == "gateway":
        # One client call: the gateway client chunks to ``cap`` (default: the
        # tier's) and reaps its own partial work; the checks below still apply.
        kwargs = {"count": n, "labels": list(labels) if labels else None, "max_per_call": cap}
        calls = [(n, ClientCall("fork", (parent_id,), kwargs))]
    else:
        step = max(1, cap or NODE_FORK_MAX)
        calls = [
            (min(step, n - start), ClientCall("fork_session", (parent_id, min(step, n - start))))
            for start in range(0, n, step)
        ]
    created: list[str] = []
    infos: list[ChildInfo] = []
    try:
        for count, call in calls:
            resp = yield call
            children = field_of(resp, "children")
            if children is None or isinstance(children, (str, bytes, Mapping)):
                raise error_cls(f"fork of {parent_id!r} answered without a children list")
            batch = [_child_info(child) for child in children]
            created.extend(info.id for info in batch if info is not None)
            for info, child in zip(batch, children, strict=True):
                if info is None:
                    raise error_cls(
                        f"fork of {parent_id!r} returned a child without an id: {child!r}"
                    )
                infos.append(info)
            if len(batch) != count:
                raise ForkShortError(
                    f"fork of {parent_id!r} returned {len(batch)} children, asked for {count} "
                    f"({len(created)} created so far are being deleted)",
                    error_code="fork_short",
                )
        return infos
    except Exception:
        for cid in created:
            try:
                yield ClientCall("delete_session", (cid,))
            except Exception:
                continue  # best effort; the fork's own error is what matters
        raise


def _check_mode(on_infra_error: str) -> InfraMode:
    if on_infra_error not in ("raise", "none"):
        raise CollimateUsageError(
            f'on_infra_error must be "raise" or "none", got {on_infra_error!r}'
        )
    return on_infra_error  # type: ignore[return-value]


def _workers(n: int, concurrency: int | None) -> int:
    return max(1, concurrency if concurrency is not None else min(n, 24))


def _one_request(
    children: Sequence[_ExecOps],
    code: str | None,
    **exec_args: Any,
) -> tuple[Any, list[Op[ExecResult]]] | None:
    """The children's client and an exec operation per child, when that client's node takes
    the whole group in one request (our local node's ``exec_batch``); else ``None``."""
    if not children:
        return None
    client = children[0].client
    if not all(child.client is client for child in children) or not has_batch_route(client):
        return None
    return client, [child._exec_op(code, **exec_args) for child in children]


def _settle(outcomes: list[tuple[bool, Any]], mode: InfraMode) -> list[Any]:
    """Results in order; in ``raise`` mode the first failure (by position) propagates."""
    out: list[Any] = []
    for ok, value in outcomes:
        if ok:
            out.append(value)
        elif mode == "raise":
            raise value
        else:
            out.append(None)
    return out


class _GroupBase(Generic[S]):
    """What both group flavours share: the children, their seeds and the parent."""

    def __init__(self, parent: Any, children: Sequence[S], seeds: Sequence[str | None]) -> None:
        self.parent = parent
        self.children: list[S] = list(children)
        self.seeds: list[str | None] = list(seeds)

    def __len__(self) -> int:
        return len(self.children)

    def __iter__(self) -> Iterator[S]:
        return iter(self.children)

    def __getitem__(self, index: int) -> S:
        return self.children[index]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(width={len(self.children)})"


class ForkGroup(_GroupBase[M]):
    """``n`` forked children of one sandbox; the parent is never closed by the group.

    Made by :meth:`Sandbox.fork_group`. Supports ``len``, iteration and
    indexing; a context manager that deletes the children on exit.

    Attributes:
        parent: the sandbox that was forked.
        children: the children, in fork order.
        seeds: each child's default seed (per ``seed_mode``).

    >>> from collimate_rl.sandbox import Sandbox
    >>> from collimate_rl.sandbox._shell import ShellClient
    >>> with Sandbox("python3", client=ShellClient()) as box:
    ...     _ = box.exec(command="echo base > f")
    ...     with box.fork_group(3) as group:
    ...         outs = group.exec_each(command="echo $$ >> f; wc -l < f")
    >>> [r.stdout.strip() for r in outs]
    ['2', '2', '2']
    """

    def exec_each(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        concurrency: int | None = None,
        on_infra_error: str = "raise",
    ) -> list[ExecResult | None]:
        """Run the same exec in every child, concurrently; results in child order.

        On our local node the whole group goes in one ``exec_batch`` request;
        elsewhere each child's exec is its own request, from a thread pool.

        Args:
            code, command, commands, files, timeout_seconds: as :meth:`Sandbox.exec`.
            concurrency: worker threads (default ``min(n, 24)``).
            on_infra_error: ``"raise"`` re-raises the first failure by position;
                ``"none"`` puts ``None`` in a failed child's slot.
        """

        mode = _check_mode(on_infra_error)
        batched = _one_request(
            self.children,
            code,
            command=command,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
        )
        if batched is not None:
            client, ops = batched
            return _settle(drive_batched(ops, client), mode)

        def run(_: int, child: M) -> ExecResult:
            return child.exec(
                code,
                command=command,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
            )

        return self.map(run, concurrency=concurrency, on_infra_error=on_infra_error)

    def map(
        self,
        fn: Callable[[int, M], T],
        *,
        concurrency: int | None = None,
        on_infra_error: str = "raise",
    ) -> list[T | None]:
        """Call ``fn(index, child)`` for every child on a thread pool; results in order."""
        mode = _check_mode(on_infra_error)
        if not self.children:
            return []

        def guarded(index: int) -> tuple[bool, Any]:
            try:
                return True, fn(index, self.children[index])
            except Exception as exc:
                return False, exc

        with ThreadPoolExecutor(max_workers=_workers(len(self), concurrency)) as pool:
            outcomes = list(pool.map(guarded, range(len(self.children))))
        return _settle(outcomes, mode)

    def close(self) -> None:
        """Delete every child (best effort, never raises). The parent stays."""
        if len(self.children) <= 1:
            for child in self.children:
                child.close()
            return
        with ThreadPoolExecutor(max_workers=_workers(len(self), None)) as pool:
            list(pool.map(lambda child: child.close(), self.children))

    def __enter__(self) -> ForkGroup[M]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncForkGroup(_GroupBase[AM]):
    """The async twin of :class:`ForkGroup` (made by :meth:`AsyncSandbox.fork_group`).

    >>> import anyio
    >>> from collimate_rl.sandbox import AsyncSandbox
    >>> from collimate_rl.sandbox._shell import AsyncShellClient
    >>> async def main():
    ...     async with AsyncSandbox("python3", client=AsyncShellClient()) as box:
    ...         async with await box.fork_group(2) as group:
    ...             return [r.ok for r in await group.exec_each(command="true")]
    >>> anyio.run(main)
    [True, True]
    """

    async def exec_each(
        self,
        code: str | None = None,
        *,
        command: str | None = None,
        commands: Sequence[Sequence[str]] | None = None,
        files: Sequence[Mapping[str, str]] | None = None,
        timeout_seconds: int | None = None,
        concurrency: int | None = None,
        on_infra_error: str = "raise",
    ) -> list[ExecResult | None]:
        """See :meth:`ForkGroup.exec_each`; ``concurrency`` bounds in-flight execs."""
        mode = _check_mode(on_infra_error)
        batched = _one_request(
            self.children,
            code,
            command=command,
            commands=commands,
            files=files,
            timeout_seconds=timeout_seconds,
        )
        if batched is not None:
            client, ops = batched
            limit = _workers(len(self), concurrency)
            return _settle(await adrive_batched(ops, client, limit), mode)

        async def run(_: int, child: AM) -> ExecResult:
            return await child.exec(
                code,
                command=command,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
            )

        return await self.map(run, concurrency=concurrency, on_infra_error=on_infra_error)

    async def map(
        self,
        fn: Callable[[int, AM], Awaitable[T]],
        *,
        concurrency: int | None = None,
        on_infra_error: str = "raise",
    ) -> list[T | None]:
        """Await ``fn(index, child)`` for every child concurrently; results in order."""
        mode = _check_mode(on_infra_error)
        outcomes: list[tuple[bool, Any]] = [(False, None)] * len(self.children)
        limiter = anyio.CapacityLimiter(_workers(len(self), concurrency))

        async def guarded(index: int) -> None:
            async with limiter:
                try:
                    outcomes[index] = (True, await fn(index, self.children[index]))
                except Exception as exc:
                    outcomes[index] = (False, exc)

        async with anyio.create_task_group() as tg:
            for index in range(len(self.children)):
                tg.start_soon(guarded, index)
        return _settle(outcomes, mode)

    async def aclose(self) -> None:
        """Delete every child (best effort, never raises). The parent stays."""
        limiter = anyio.CapacityLimiter(_workers(len(self), None))

        async def close_one(child: AM) -> None:
            async with limiter:
                await child.aclose()

        async with anyio.create_task_group() as tg:
            for child in self.children:
                tg.start_soon(close_one, child)

    async def __aenter__(self) -> AsyncForkGroup[AM]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
