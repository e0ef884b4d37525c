"""The fleet's clients: the daemon client's session surface, routed over the fleet's nodes.

:class:`FleetClient` has the methods of :class:`~collimate_rl.wire.CollimateClient`
(and its twin in :mod:`._async_client` those of the async client), so grading, ``Sandbox``,
fork groups and the envs use a fleet exactly like one node. Underneath, each node is
reached by an ordinary daemon client over HTTP on the node's own address; the
:class:`~collimate_rl.ray._router.Router` decides where each call goes.

Two extensions a single node does not need: ``create_session(..., node=tag)`` puts a
session on a chosen node, and ``spread_targets()`` lists the nodes new work may go to
(the vector env forks one parent per target, so its groups spread over the nodes).

>>> from collimate_rl.ray._directory import Directory
>>> client = FleetClient(Directory())
>>> client.spread_targets(), client.capacity()
((), 0)
>>> client.create_session("python3")
Traceback (most recent call last):
...
collimate_rl.ray._errors.NoHealthyNodeError: no healthy node in the fleet to take new work (it has no nodes); wait for nodes to join or start a new fleet
>>> client.close()
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from collimate_rl.errors import (
    CollimateCapacityError,
    CollimateDrainingError,
    CollimateError,
    CollimateUsageError,
)
from collimate_rl.ray._directory import Directory, FleetNode
from collimate_rl.ray._errors import NodeLostError, NoHealthyNodeError
from collimate_rl.ray._ids import fleet_id
from collimate_rl.ray._router import (
    Placement,
    Router,
    fleet_created,
    fleet_deleted,
    fleet_forked,
    fleet_health,
    fleet_session,
    no_healthy_node,
)
from collimate_rl.templates import environment
from collimate_rl.wire import CollimateClient
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

__all__ = [
    "REFUSED",
    "BatchPart",
    "Commands",
    "Files",
    "FleetClient",
    "FleetClientBase",
    "bake_spec",
    "images_unsupported",
]

T = TypeVar("T")
Files = Sequence[Mapping[str, str]]
Commands = Sequence[Sequence[str]]

#: Errors that prove a placed call ran nowhere: it may go to another node.
REFUSED = (CollimateDrainingError, CollimateCapacityError)


def images_unsupported() -> CollimateError:
    """The error ``images()`` raises on a fleet client (the daemon surface has no catalog)."""
    return CollimateError(
        "images() is gateway only: a fleet of local nodes has no image catalog; use templates()"
    )


def bake_spec(
    template_id: str,
    setup: Sequence[str],
    base: str,
    network: bool,
    timeout: float | None,
    ready: Mapping[str, Any] | None,
    egress: Mapping[str, Any] | None,
    image: str | None = None,
) -> dict[str, Any]:
    """``bake_template``'s keyword arguments, as the fleet records them for joining nodes."""
    return {
        "image": image,
        "template_id": template_id,
        "setup": list(setup),
        "base": base,
        "network": network,
        "timeout": timeout,
        "ready": dict(ready) if ready else None,
        "egress": dict(egress) if egress is not None else None,
    }


@dataclasses.dataclass
class BatchPart:
    """The items of one batch that go to one node, and where their results belong."""

    node: FleetNode
    indices: list[int] = dataclasses.field(default_factory=list)
    items: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class FleetClientBase:
    """Settings and routing shared by both fleet clients."""

    def __init__(
        self,
        directory: Directory,
        *,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.15,
        retry_budget: float = 30.0,
    ) -> None:
        # The node clients check these too; checking here fails before any node is dialled.
        CollimateClient(
            timeout=timeout, retries=retries, backoff=backoff, retry_budget=retry_budget
        ).close()
        self._router = Router(directory)
        self._settings: dict[str, Any] = {
            "timeout": timeout,
            "retries": retries,
            "backoff": backoff,
            "retry_budget": retry_budget,
        }
        self._lock = threading.Lock()

    def _batch_plan(
        self, items: Sequence[Mapping[str, Any]]
    ) -> tuple[dict[str, BatchPart], list[BatchResult | None]]:
        """Split a batch by node: session items go where their session lives, one-shots are placed.

        Returns the parts by node tag, and a result list with the items that
        could not be routed already filled in (their node is lost or unknown).
        """
        parts: dict[str, BatchPart] = {}
        results: list[BatchResult | None] = [None] * len(items)
        for index, item in enumerate(items):
            fields = dict(item)
            try:
                if fields.get("session_id") is not None:
                    node, fields["session_id"] = self._router.locate(fields["session_id"])
                else:
                    node = self._router.choose("exec")
            except CollimateUsageError:
                raise
            except CollimateError as exc:
                results[index] = exc
                continue
            part = parts.setdefault(node.tag, BatchPart(node))
            part.indices.append(index)
            part.items.append(fields)
        return parts, results

    def _target(
        self, kind: Placement, node: str | None, refused: list[str], last: CollimateError | None
    ) -> FleetNode:
        """Where a placed call goes next: ``node`` if pinned, else the least-loaded healthy
        node not in ``refused``; with none left, the refusal that led here is the cause."""
        try:
            return self._router.pinned(node) if node else self._router.choose(kind, refused)
        except NoHealthyNodeError as none:
            if last is None:
                raise
            raise none from last

    @staticmethod
    def _may_go_elsewhere(exc: CollimateError, node: str | None) -> bool:
        """Whether a refused placed call may go to another node: not pinned, and it provably
        ran nowhere (a refusal, or a node lost before the call was sent)."""
        return not node and not (isinstance(exc, NodeLostError) and exc.sent)

    def _serving(self) -> list[FleetNode]:
        return [node for node in self.directory.nodes() if node.state.serves_sessions]

    def _bake_targets(self) -> list[FleetNode]:
        """The nodes a bake goes to: every healthy one (there must be one)."""
        nodes = self.directory.placeable()
        if not nodes:
            raise no_healthy_node(self.directory.nodes())
        return nodes

    def _baked(self, spec: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any]:
        """Record a bake for joining nodes; the first node's answer, with every node's tag."""
        self.directory.record_bake(spec)
        return {**next(iter(answers.values())), "nodes": sorted(answers)}

    @staticmethod
    def _batch_fill(
        results: list[BatchResult | None], part: BatchPart, got: list[BatchResult] | CollimateError
    ) -> None:
        for n, index in enumerate(part.indices):
            results[index] = got if isinstance(got, CollimateError) else got[n]

    @staticmethod
    def _deletions(
        router: Router, session_ids: Sequence[str]
    ) -> dict[str, tuple[FleetNode, list[str]]]:
        by_node: dict[str, tuple[FleetNode, list[str]]] = {}
        for session_id in session_ids:
            try:
                node, sid = router.locate(session_id)
            except CollimateError:
                continue  # like delete_session: an id that cannot be deleted is just not deleted
            by_node.setdefault(node.tag, (node, []))[1].append(sid)
        return by_node

    @property
    def directory(self) -> Directory:
        """The fleet's node entries this client routes by."""
        return self._router.directory

    def node_of(self, session_id: str) -> FleetNode:
        """The node that holds ``session_id`` (whatever its state).

        Raises:
            CollimateUsageError: not a fleet session id.
            CollimateNotFoundError: a node this fleet never had.
        """
        return self.directory.node_of(session_id)

    def spread_targets(self) -> tuple[str, ...]:
        """The tags of the nodes new work may go to now (healthy ones), oldest first.

        The vector env forks its groups from one parent per target.
        """
        return self._router.spread_targets()

    def capacity(self) -> int:
        """Execs the healthy nodes run at once (the sum of their ``max_inflight``).

        A good ``concurrency`` for ``grade_batch`` and the vector env over this fleet.
        """
        return self.directory.capacity()

    def __reduce__(self) -> Any:
        raise CollimateUsageError(
            f"a {type(self).__name__} cannot be sent to another process (its fleet lives in "
            "this one): create the RayFleet in the process that uses it, e.g. inside your "
            "rollout actor"
        )

    def calls_by_node(self) -> dict[str, int]:
        """How many calls this client sent to each node (by tag): shows how work spread."""
        return dict(self._router.calls)

    def __repr__(self) -> str:
        nodes = ", ".join(f"{n.tag}={n.state.value}" for n in self.directory.nodes())
        return f"{type(self).__name__}({nodes})"


C = TypeVar("C", bound="FleetClient")


class FleetClient(FleetClientBase):
    """A blocking client over a fleet's nodes, with :class:`CollimateClient`'s methods.

    Get one from :meth:`RayFleet.client() <collimate_rl.ray.RayFleet.client>`; it is
    closed with the fleet. Session ids are fleet ids (``<node tag>.<session id>``).

    Args:
        directory: the fleet's node entries (and the nodes' bearer tokens).
        timeout, retries, backoff, retry_budget: as for :class:`CollimateClient`; used
            by the client of each node.
    """

    def __init__(self, directory: Directory, **kwargs: Any) -> None:
        super().__init__(directory, **kwargs)
        self._clients: dict[str, CollimateClient] = {}

    def _client(self, node: FleetNode) -> CollimateClient:
        with self._lock:
            client = self._clients.get(node.tag)
            if client is None:
                client = CollimateClient(
                    node.address,
                    token=self.directory.token_of(node.tag),
                    sleep=functools.partial(self._sleep, node.tag),
                    **self._settings,
                )
                self._clients[node.tag] = client
            return client

    def _sleep(self, tag: str, seconds: float) -> None:
        self._router.before_retry(tag)
        time.sleep(seconds)

    def _on(
        self, node: FleetNode, kind: Placement | None, call: Callable[[CollimateClient], T]
    ) -> T:
        client = self._client(node)
        self._router.started(node, kind)
        try:
            result = call(client)
        except CollimateError as exc:
            error = self._router.failure(node, exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            self._router.finished(node)
        self._router.confirm(node)
        return result

    def _placed(
        self, kind: Placement, call: Callable[[CollimateClient], T], node: str | None = None
    ) -> tuple[FleetNode, T]:
        refused: list[str] = []
        last: CollimateError | None = None
        while True:
            target = self._target(kind, node, refused, last)
            try:
                return target, self._on(target, kind, call)
            except (*REFUSED, NodeLostError) as exc:
                if not self._may_go_elsewhere(exc, node):
                    raise
                refused.append(target.tag)
                last = exc

    # -- node-level calls ------------------------------------------------------------------

    def health(self) -> Health:
        """The fleet's health: sums over the nodes that answer, and a ``nodes`` list."""
        healths: dict[str, Health] = {}
        for node in self.directory.nodes():
            if node.state.serves_sessions:
                try:
                    healths[node.tag] = self._on(node, None, lambda c: c.health())
                except CollimateError:
                    continue  # the node's entry says what happened to it
        return fleet_health(healths, self.directory.nodes())

    def templates(self) -> list[str]:
        """The templates every answering node serves."""
        return list(self.health().templates)

    def images(self) -> list[ImageInfo]:
        """Always raises: the image catalog is gateway only."""
        raise images_unsupported()

    list_images = images

    def list_sessions(self) -> list[SessionInfo]:
        """Every live session on every node that serves sessions (fleet ids)."""
        rows: list[SessionInfo] = []
        for node in self.directory.nodes():
            if node.state.serves_sessions:
                found = self._on(node, None, lambda c: c.list_sessions())
                rows += [fleet_session(node.tag, info) for info in found]
        return rows

    def bake_template(
        self,
        template_id: str,
        setup: Sequence[str],
        *,
        base: str = "python3",
        network: bool = False,
        timeout: float | None = 900.0,
        ready: Mapping[str, Any] | None = None,
        egress: Mapping[str, Any] | None = None,
        image: str | None = None,
    ) -> dict[str, Any]:
        """Bake a template on every healthy node; nodes that join later bake it too (an
        ``image`` is pulled by each node into its own store)."""
        spec = bake_spec(template_id, setup, base, network, timeout, ready, egress, image)
        answers = {
            node.tag: self._on(node, None, lambda c: c.bake_template(**spec))
            for node in self._bake_targets()
        }
        return self._baked(spec, answers)

    def store_images(self) -> list[dict[str, Any]]:
        """The images in every serving node's store, each row with its ``node`` tag."""
        rows: list[dict[str, Any]] = []
        for node in self._serving():
            rows += [
                {**row, "node": node.tag}
                for row in self._on(node, None, lambda c: c.store_images())
            ]
        return rows

    def image_pulls(self) -> dict[str, Any]:
        """Each serving node's pulls under way, by node tag."""
        return {
            node.tag: self._on(node, None, lambda c: c.image_pulls()) for node in self._serving()
        }

    def prune_images(self) -> dict[str, Any]:
        """Prune every serving node's image store; what each removed, by node tag."""
        return {
            node.tag: self._on(node, None, lambda c: c.prune_images()) for node in self._serving()
        }

    def env(
        self,
        ref: str,
        *,
        width: int | None = None,
        name: str | None = None,
        ready: Any = None,
        env: Any = None,
        secrets: Any = None,
    ) -> Any:
        """An environment handle, as :meth:`CollimateClient.env` gives."""
        return environment(self, ref, width=width, name=name, ready=ready, env=env, secrets=secrets)

    # -- sessions ----------------------------------------------------------------------

    def create_session(
        self, template_id: str, *, egress: Mapping[str, Any] | None = None, node: str | None = None
    ) -> CreateSessionResponse:
        """A new session on the least-loaded healthy node (or on ``node``); a fleet id."""
        target, resp = self._placed(
            "session", lambda c: c.create_session(template_id, egress=egress), node
        )
        return fleet_created(target.tag, resp)

    def get_session(self, session_id: str) -> SessionInfo:
        """The session's row, from its node."""
        node, sid = self._router.locate(session_id)
        return fleet_session(node.tag, self._on(node, None, lambda c: c.get_session(sid)))

    def delete_session(self, session_id: str) -> DeleteResponse:
        """Delete on the session's node. Never raises: ``deleted`` is False on any failure."""
        try:
            node, sid = self._router.locate(session_id)
            resp = self._on(node, None, lambda c: c.delete_session(sid))
        except CollimateError:
            return DeleteResponse.from_raw({"deleted": False, "session_id": str(session_id)})
        return fleet_deleted(session_id, resp)

    def session_exec(
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
        """Run in a session, on its node."""
        node, sid = self._router.locate(session_id)
        return self._on(
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

    def exec_once(
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
        """A one-shot exec on the node with the fewest execs per slot."""
        _, resp = self._placed(
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

    def fork_session(self, session_id: str, count: int) -> ForkResponse:
        """Fork on the session's node: the children live where their parent does."""
        node, sid = self._router.locate(session_id)
        return fleet_forked(node.tag, self._on(node, None, lambda c: c.fork_session(sid, count)))

    def exec_batch(self, items: Sequence[Mapping[str, Any]]) -> list[BatchResult]:
        """Many execs in one call: one batch request per node, the nodes in parallel.

        An item whose node is lost (or that could not be placed) gets that
        error as its result, like any other per-item error.
        """
        parts, results = self._batch_plan(items)

        def send(part: BatchPart) -> None:
            try:
                got: list[BatchResult] | CollimateError = self._on(
                    part.node, None, lambda c: c.exec_batch(part.items)
                )
            except CollimateUsageError:
                raise
            except CollimateError as exc:
                got = exc
            self._batch_fill(results, part, got)

        if len(parts) <= 1:
            for part in parts.values():
                send(part)
        else:
            with ThreadPoolExecutor(len(parts), thread_name_prefix="fleet-batch") as pool:
                for future in [pool.submit(send, part) for part in parts.values()]:
                    future.result()
        return [r for r in results if r is not None]

    def delete_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Delete many sessions, one request per node; the fleet ids deleted."""
        deleted: list[str] = []
        for tag, (node, sids) in self._deletions(self._router, session_ids).items():
            try:
                gone = self._on(node, None, lambda c: c.delete_sessions(sids))  # noqa: B023 (called at once)
            except CollimateError:
                continue
            deleted += [fleet_id(tag, sid) for sid in gone]
        return deleted

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the node clients' connections (idempotent)."""
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            client.close()

    def __enter__(self: C) -> C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
