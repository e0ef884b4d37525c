"""The async fleet client: :class:`~collimate_rl.ray._client.FleetClient`'s twin.

Same routing (:class:`~collimate_rl.ray._router.Router`), same methods, awaited; each node
is reached by an :class:`~collimate_rl.wire.AsyncCollimateClient`. A test compares the two
clients' signatures.

>>> from collimate_rl.ray._directory import Directory
>>> AsyncFleetClient(Directory()).spread_targets()
()
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import anyio

from collimate_rl.errors import CollimateError, CollimateUsageError
from collimate_rl.ray._client import (
    REFUSED,
    BatchPart,
    Commands,
    Files,
    FleetClientBase,
    bake_spec,
    images_unsupported,
)
from collimate_rl.ray._directory import Directory, FleetNode
from collimate_rl.ray._errors import NodeLostError
from collimate_rl.ray._ids import fleet_id
from collimate_rl.ray._router import (
    Placement,
    fleet_created,
    fleet_deleted,
    fleet_forked,
    fleet_health,
    fleet_session,
)
from collimate_rl.templates import environment_async
from collimate_rl.wire import AsyncCollimateClient
from collimate_rl.wire._daemon_flows import BatchResult
from collimate_rl.wire.models import (
    CreateSessionResponse,
    DeleteResponse,
    ExecResponse,
    ForkResponse,
    Health,
    ImageInfo,
    SessionInfo,
)

__all__ = ["AsyncFleetClient"]

T = TypeVar("T")

A = TypeVar("A", bound="AsyncFleetClient")


class AsyncFleetClient(FleetClientBase):
    """The async twin of :class:`FleetClient` (same arguments and methods)."""

    def __init__(self, directory: Directory, **kwargs: Any) -> None:
        super().__init__(directory, **kwargs)
        self._clients: dict[str, AsyncCollimateClient] = {}

    def _client(self, node: FleetNode) -> AsyncCollimateClient:
        with self._lock:
            client = self._clients.get(node.tag)
            if client is None:
                client = AsyncCollimateClient(
                    node.address,
                    token=self.directory.token_of(node.tag),
                    sleep=functools.partial(self._sleep, node.tag),
                    **self._settings,
                )
                self._clients[node.tag] = client
            return client

    async def _sleep(self, tag: str, seconds: float) -> None:
        # A check may probe the node and ask Ray: not on the event loop.
        await anyio.to_thread.run_sync(self._router.before_retry, tag)
        await anyio.sleep(seconds)

    async def _on(
        self,
        node: FleetNode,
        kind: Placement | None,
        call: Callable[[AsyncCollimateClient], Awaitable[T]],
    ) -> T:
        client = self._client(node)
        self._router.started(node, kind)
        try:
            result = await call(client)
        except CollimateError as exc:
            error = await anyio.to_thread.run_sync(self._router.failure, node, exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            self._router.finished(node)
        self._router.confirm(node)
        return result

    async def _placed(
        self,
        kind: Placement,
        call: Callable[[AsyncCollimateClient], Awaitable[T]],
        node: str | None = None,
    ) -> tuple[FleetNode, T]:
        refused: list[str] = []
        last: CollimateError | None = None
        while True:
            target = self._target(kind, node, refused, last)
            try:
                return target, await self._on(target, kind, call)
            except (*REFUSED, NodeLostError) as exc:
                if not self._may_go_elsewhere(exc, node):
                    raise
                refused.append(target.tag)
                last = exc

    # -- node-level calls ------------------------------------------------------------------

    async def health(self) -> Health:
        """See :meth:`FleetClient.health`."""
        healths: dict[str, Health] = {}
        for node in self.directory.nodes():
            if node.state.serves_sessions:
                try:
                    healths[node.tag] = await self._on(node, None, lambda c: c.health())
                except CollimateError:
                    continue
        return fleet_health(healths, self.directory.nodes())

    async def templates(self) -> list[str]:
        """See :meth:`FleetClient.templates`."""
        return list((await self.health()).templates)

    async def images(self) -> list[ImageInfo]:
        """Always raises: the image catalog is gateway only."""
        raise images_unsupported()

    list_images = images

    async def list_sessions(self) -> list[SessionInfo]:
        """See :meth:`FleetClient.list_sessions`."""
        rows: list[SessionInfo] = []
        for node in self.directory.nodes():
            if node.state.serves_sessions:
                found = await self._on(node, None, lambda c: c.list_sessions())
                rows += [fleet_session(node.tag, info) for info in found]
        return rows

    async def bake_template(
        self,
        template_id: str,
        setup: Sequence[str],
        *,
        base: str = "python3",
        network: bool = False,
        timeout: float | None = 900.0,  # noqa: ASYNC109 - the bake's own limit, as the daemon client's
        ready: Mapping[str, Any] | None = None,
        egress: Mapping[str, Any] | None = None,
        image: str | None = None,
    ) -> dict[str, Any]:
        """See :meth:`FleetClient.bake_template`."""
        spec = bake_spec(template_id, setup, base, network, timeout, ready, egress, image)
        answers = {}
        for node in self._bake_targets():
            answers[node.tag] = await self._on(node, None, lambda c: c.bake_template(**spec))
        return self._baked(spec, answers)

    async def store_images(self) -> list[dict[str, Any]]:
        """See :meth:`FleetClient.store_images`."""
        rows: list[dict[str, Any]] = []
        for node in self._serving():
            found = await self._on(node, None, lambda c: c.store_images())
            rows += [{**row, "node": node.tag} for row in found]
        return rows

    async def image_pulls(self) -> dict[str, Any]:
        """See :meth:`FleetClient.image_pulls`."""
        return {
            node.tag: await self._on(node, None, lambda c: c.image_pulls())
            for node in self._serving()
        }

    async def prune_images(self) -> dict[str, Any]:
        """See :meth:`FleetClient.prune_images`."""
        return {
            node.tag: await self._on(node, None, lambda c: c.prune_images())
            for node in self._serving()
        }

    async def env(
        self,
        ref: str,
        *,
        width: int | None = None,
        name: str | None = None,
        ready: Any = None,
        env: Any = None,
        secrets: Any = None,
    ) -> Any:
        """See :meth:`FleetClient.env`."""
        return await environment_async(
            self, ref, width=width, name=name, ready=ready, env=env, secrets=secrets
        )

    # -- sessions ----------------------------------------------------------------------

    async def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None, node: str | None = None
    ) -> CreateSessionResponse:
        """See :meth:`FleetClient.create_session`."""
        target, resp = await self._placed(
            "session", lambda c: c.create_session(template_id, egress=egress), node
        )
        return fleet_created(target.tag, resp)

    async def get_session(self, session_id: str) -> SessionInfo:
        """See :meth:`FleetClient.get_session`."""
        node, sid = self._router.locate(session_id)
        return fleet_session(node.tag, await self._on(node, None, lambda c: c.get_session(sid)))

    async def delete_session(self, session_id: str) -> DeleteResponse:
        """See :meth:`FleetClient.delete_session` (never raises)."""
        try:
            node, sid = self._router.locate(session_id)
            resp = await self._on(node, None, lambda c: c.delete_session(sid))
        except CollimateError:
            return DeleteResponse.from_raw({"deleted": False, "session_id": str(session_id)})
        return fleet_deleted(session_id, resp)

    async def session_exec(
        self,
        session_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
    ) -> ExecResponse:
        """See :meth:`FleetClient.session_exec`."""
        node, sid = self._router.locate(session_id)
        return await self._on(
            node,
            None,
            lambda c: c.session_exec(
                sid,
                command=command,
                code=code,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
                seed=seed,
            ),
        )

    async def exec_once(
        self,
        template_id: str,
        *,
        command: str | None = None,
        code: str | None = None,
        commands: Commands | None = None,
        files: Files | None = None,
        timeout_seconds: int = 30,
        seed: str | None = None,
        egress: Mapping[str, Any] | None = None,
    ) -> ExecResponse:
        """See :meth:`FleetClient.exec_once`."""
        _, resp = await self._placed(
            "exec",
            lambda c: c.exec_once(
                template_id,
                command=command,
                code=code,
                commands=commands,
                files=files,
                timeout_seconds=timeout_seconds,
                seed=seed,
                egress=egress,
            ),
        )
        return resp

    async def fork_session(self, session_id: str, count: int) -> ForkResponse:
        """See :meth:`FleetClient.fork_session`."""
        node, sid = self._router.locate(session_id)
        forked = await self._on(node, None, lambda c: c.fork_session(sid, count))
        return fleet_forked(node.tag, forked)

    async def exec_batch(self, items: Sequence[Mapping[str, Any]]) -> list[BatchResult]:
        """See :meth:`FleetClient.exec_batch`."""
        parts, results = self._batch_plan(items)

        async def send(part: BatchPart) -> None:
            try:
                got: list[BatchResult] | CollimateError = await self._on(
                    part.node, None, lambda c: c.exec_batch(part.items)
                )
            except CollimateUsageError:
                raise
            except CollimateError as exc:
                got = exc
            self._batch_fill(results, part, got)

        async with anyio.create_task_group() as group:
            for part in parts.values():
                group.start_soon(send, part)
        return [r for r in results if r is not None]

    async def delete_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """See :meth:`FleetClient.delete_sessions`."""
        deleted: list[str] = []
        for tag, (node, sids) in self._deletions(self._router, session_ids).items():
            try:
                gone = await self._on(node, None, lambda c: c.delete_sessions(sids))  # noqa: B023 (called at once)
            except CollimateError:
                continue
            deleted += [fleet_id(tag, sid) for sid in gone]
        return deleted

    # -- lifecycle -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the node clients' connections (idempotent)."""
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
