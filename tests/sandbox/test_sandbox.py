"""The Sandbox handle: lifecycle, attach/adopt, exec, forks (isolation and strict width)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collimate_rl.sandbox as sandbox_pkg
from collimate_rl.errors import (
    CollimateCapacityError,
    CollimateError,
    CollimateNotFoundError,
    CollimateTransportError,
    CollimateUsageError,
    ForkShortError,
)
from collimate_rl.sandbox import (
    WARM_FORK_MS,
    AsyncForkGroup,
    AsyncSandbox,
    ExecResult,
    ForkGroup,
    Sandbox,
)
from collimate_rl.sandbox._shell import ShellClient
from collimate_rl.seeds import DET_SEED


def alive(client: Any, session_id: str) -> bool:
    try:
        client.get_session(session_id)
    except CollimateNotFoundError:
        return False
    return True


# ------------------------------------------------------------------ lifecycle


def test_context_manager_reaps_on_exception(client: Any) -> None:
    with pytest.raises(ZeroDivisionError), Sandbox("python3", client=client) as box:
        sid = box.session_id
        assert sid is not None and alive(client, sid)
        _ = 1 / 0
    assert box.session_id is None
    with pytest.raises(CollimateNotFoundError) as info:
        client.get_session(sid)
    assert info.value.status == 404


def test_context_manager_reaps_on_normal_exit(client: Any) -> None:
    with Sandbox("python3", client=client) as box:
        sid = box.session_id
        assert box.exec(command="true").ok
    assert sid is not None and not alive(client, sid)


def test_keep_on_error_leaves_the_session(client: Any) -> None:
    with pytest.raises(KeyError), Sandbox("python3", client=client, keep_on_error=True) as box:
        sid = box.session_id
        raise KeyError("boom")
    assert sid is not None and alive(client, sid)
    box.close()
    assert not alive(client, sid)


def test_close_is_idempotent_and_never_raises(client: Any) -> None:
    box = Sandbox("python3", client=client).start()
    sid = box.session_id
    assert sid is not None
    client.delete_session(sid)  # already gone server-side
    box.close()
    box.close()
    assert box.session_id is None


def test_exec_autostarts_and_failures_are_data(client: Any) -> None:
    box = Sandbox("python3", client=client, default_timeout=5)
    try:
        assert box.session_id is None
        result = box.exec(command="echo out; echo err >&2; exit 3")
        assert isinstance(result, ExecResult)
        assert not result.ok and result.exit_code == 3
        assert "out" in result.stdout and "err" in result.stdout
        assert box.exec("print(2 + 2)").stdout == "4\n"
        assert box.exec(commands=[["echo", "argv"]]).stdout.strip() == "argv"
        assert isinstance(result.raw, dict) and "stdout" in result.raw
    finally:
        box.close()


def test_exec_timeout_is_data(client: Any) -> None:
    with Sandbox("python3", client=client) as box:
        result = box.exec(command="sleep 5", timeout_seconds=1)
        assert result.exit_code == -1 and not result.ok


def test_exec_needs_something_to_run(client: Any) -> None:
    box = Sandbox("python3", client=client)
    with pytest.raises(CollimateUsageError):
        box.exec(files=[{"path": "a", "content": "b"}])
    assert box.session_id is None  # nothing was created


def test_files_persist_across_execs_and_reset_starts_fresh(client: Any) -> None:
    with Sandbox("python3", client=client) as box:
        box.exec(command="echo kept > f")
        assert box.exec(command="cat f").stdout == "kept\n"
        first = box.session_id
        box.reset()
        assert box.session_id not in (None, first)
        assert not box.exec(command="cat f").ok
        assert first is not None and not alive(client, first)


def test_default_seed_and_explicit_seed(shell_client: ShellClient) -> None:
    seed = "ab" * 32
    with Sandbox("python3", client=shell_client, default_seed=seed) as box:
        assert box.exec(command="echo $COLLIMATE_SEED").stdout.strip() == seed
        assert box.exec(command="true", seed=DET_SEED).seed == DET_SEED
    with pytest.raises(CollimateUsageError):
        Sandbox("python3", client=shell_client, default_seed="nope")


def test_warm_hit_and_fork_time(client: Any) -> None:
    with Sandbox("python3", client=client) as box:
        assert box.fork_time_ms is not None
        assert box.warm_hit == (0.0 <= box.fork_time_ms <= WARM_FORK_MS)
    adopted = Sandbox.adopt(client, "whatever")
    assert adopted.fork_time_ms is None and not adopted.warm_hit


def test_start_without_session_id_raises(shell_client: ShellClient) -> None:
    class NoId(ShellClient):
        def create_session(self, template_id: str, **kw: Any) -> dict[str, Any]:
            resp = super().create_session(template_id)
            del resp["session_id"]
            return resp

    client = NoId()
    with pytest.raises(CollimateError, match="no session_id"):
        Sandbox("python3", client=client).start()
    client.close()


def test_unknown_template_is_the_servers_404(client: Any) -> None:
    with pytest.raises(CollimateNotFoundError):
        Sandbox("no-such-template", client=client).start()


# ------------------------------------------------------------ attach / adopt


def test_attach_adopts_a_live_session(client: Any) -> None:
    sid = client.create_session("python3")["session_id"]
    client.session_exec(sid, command="echo before > f")
    with Sandbox.attach(client, sid) as box:
        assert box.session_id == sid and box.template == "python3"
        assert box.fork_time_ms is None
        assert box.exec(command="cat f").stdout == "before\n"
    assert not alive(client, sid)


def test_attach_missing_session_404s(client: Any) -> None:
    with pytest.raises(CollimateNotFoundError) as info:
        Sandbox.attach(client, "no-such-session")
    assert info.value.status == 404


def test_adopt_does_not_check(client: Any) -> None:
    box = Sandbox.adopt(client, "no-such-session", template="python3")
    with pytest.raises(CollimateNotFoundError):
        box.exec(command="true")


# --------------------------------------------------------------------- forks


@pytest.fixture
def parent(client: Any) -> Iterator[Sandbox]:
    with Sandbox("python3", client=client) as box:
        box.exec(command="mkdir -p d && echo base > d/shared")
        yield box


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    width=st.integers(1, 4),
    writes=st.lists(
        st.tuples(st.integers(0, 3), st.binary(min_size=0, max_size=64)), min_size=1, max_size=4
    ),
)
def test_fork_isolation(parent: Sandbox, width: int, writes: list[tuple[int, bytes]]) -> None:
    with parent.fork_group(width) as group:
        assert len(group) == width
        expected: dict[int, bytes] = {}
        for index, data in writes:
            if index >= width:
                continue
            group[index].upload_bytes("d/shared", data)
            expected[index] = data
        for index, child in enumerate(group):
            assert child.download("d/shared") == expected.get(index, b"base\n")
        ids = {child.session_id for child in group} | {parent.session_id}
        assert len(ids) == width + 1
    assert parent.download("d/shared") == b"base\n"


def test_fork_children_inherit_and_close(parent: Sandbox, client: Any) -> None:
    children = parent.fork(2)
    try:
        assert [c.template for c in children] == ["python3", "python3"]
        for child in children:
            assert child.exec(command="cat d/shared").stdout == "base\n"
    finally:
        for child in children:
            child.close()
    assert all(not alive(client, c) for c in [x.session_id or "gone" for x in children])
    assert parent.session_id is not None and alive(client, parent.session_id)


def test_fork_group_exec_each_and_map(parent: Sandbox) -> None:
    with parent.fork_group(3, seed_mode="deterministic") as group:
        assert isinstance(group, ForkGroup)
        assert group.seeds == [DET_SEED] * 3
        results = group.exec_each(command="cat d/shared")
        assert [r.stdout if r else None for r in results] == ["base\n"] * 3
        ids = group.map(lambda i, child: (i, child.session_id))
        assert [i for i, _ in ids] == [0, 1, 2]


class CountingBatches:
    """A real node client that counts its batch requests and single execs."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.batches = self.singles = 0

    def exec_batch(self, items: Any) -> Any:
        self.batches += 1
        return self._client.exec_batch(items)

    def session_exec(self, session_id: str, **kw: Any) -> Any:
        self.singles += 1
        return self._client.session_exec(session_id, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_fork_group_exec_each_is_one_request_on_our_node(node_client: Any) -> None:
    client = node_client
    counting = CountingBatches(client)
    with Sandbox("python3", client=counting) as box, box.fork_group(3) as group:
        results = group.exec_each(code="import os; print(len(os.environ['COLLIMATE_SEED']))")
        assert [r.stdout if r else None for r in results] == ["64\n"] * 3
        assert (counting.batches, counting.singles) == (1, 0)
        client.delete_session(group[1].session_id or "")
        results = group.exec_each(command="true", on_infra_error="none")
        assert [r is None for r in results] == [False, True, False]
        with pytest.raises(CollimateNotFoundError):
            group.exec_each(command="true")
        assert (counting.batches, counting.singles) == (3, 0)


class ShedsOnce(CountingBatches):
    """The node sheds the last item of the first batch (``at_capacity``: it did not run)."""

    def exec_batch(self, items: Any) -> Any:
        self.batches += 1
        if self.batches > 1:
            return self._client.exec_batch(items)
        shed = CollimateCapacityError(
            "this batch item was shed", status=503, error_code="at_capacity"
        )
        return [*self._client.exec_batch(items[:-1]), shed]


def test_fork_group_exec_each_resends_what_the_node_shed(node_client: Any) -> None:
    """Like a single exec's 503, a shed item is sent again (within the client's retries)."""
    shedding = ShedsOnce(node_client)
    with Sandbox("python3", client=shedding) as box, box.fork_group(3) as group:
        results = group.exec_each(command="echo ran")
    assert [r.stdout if r else None for r in results] == ["ran\n"] * 3
    assert (shedding.batches, shedding.singles) == (2, 0)


def test_fork_group_seed_modes(shell_client: ShellClient) -> None:
    with Sandbox("python3", client=shell_client) as box:
        with box.fork_group(3) as crn:
            assert len(set(crn.seeds)) == 1 and crn.seeds[0] is not None
            outs = crn.exec_each(command="echo $COLLIMATE_SEED")
            assert {r.stdout.strip() for r in outs if r} == {crn.seeds[0]}
        with box.fork_group(2, seed_mode="vanilla") as vanilla:
            assert vanilla.seeds == [None, None]
        with box.fork_group(2, seed_mode="crn", base_seed=DET_SEED) as based:
            assert [c.default_seed for c in based] == [DET_SEED, DET_SEED]


def test_fork_group_on_infra_error_modes(shell_client: ShellClient) -> None:
    with Sandbox("python3", client=shell_client) as box, box.fork_group(3) as group:
        shell_client.delete_session(group[1].session_id or "")
        results = group.exec_each(command="true", on_infra_error="none")
        assert [r is None for r in results] == [False, True, False]
        with pytest.raises(CollimateNotFoundError):
            group.exec_each(command="true")
        with pytest.raises(CollimateUsageError):
            group.exec_each(command="true", on_infra_error="zero")


class FlakyForks(ShellClient):
    """Forks for real, but misbehaves on the chosen call."""

    def __init__(self, mode: str, fail_on_call: int) -> None:
        super().__init__()
        self.mode = mode
        self.fail_on_call = fail_on_call
        self.fork_calls: list[int] = []

    def fork_session(self, session_id: str, count: int) -> dict[str, Any]:
        self.fork_calls.append(count)
        if len(self.fork_calls) - 1 != self.fail_on_call:
            return super().fork_session(session_id, count)
        if self.mode == "raise":
            raise CollimateTransportError("POST /v1/sessions/x/fork: connection reset")
        resp = super().fork_session(session_id, count)
        if self.mode == "short":
            resp["children"] = resp["children"][:-1]  # the dropped child still exists!
        elif self.mode == "no-id":
            resp["children"][0] = {"fork_time_ms": 0.0}
        elif self.mode == "extra":
            resp["children"] += super().fork_session(session_id, 1)["children"]
        return resp


@pytest.mark.parametrize("mode", ["raise", "short", "no-id", "extra"])
@pytest.mark.parametrize("fail_on_call", [0, 2])
def test_fork_group_strict_width_cleans_up(mode: str, fail_on_call: int) -> None:
    client = FlakyForks(mode, fail_on_call)
    try:
        with Sandbox("python3", client=client) as box:
            before = {s["session_id"] for s in client.list_sessions()}
            expected = {
                "raise": CollimateTransportError,
                "short": ForkShortError,
                "no-id": CollimateError,
                "extra": ForkShortError,
            }[mode]
            with pytest.raises(expected):
                box.fork_group(7, max_per_call=3)
            assert client.fork_calls[: fail_on_call + 1] == [3, 3, 1][: fail_on_call + 1]
            after = {s["session_id"] for s in client.list_sessions()}
            if mode in ("short", "no-id"):
                # children the server made but did not report cannot be known
                leaked = after - before
                assert len(leaked) <= 1
            else:
                assert after == before
            assert box.session_id in after
    finally:
        client.close()


def test_fork_short_error_shape() -> None:
    client = FlakyForks("short", 0)
    with Sandbox("python3", client=client) as box, pytest.raises(ForkShortError) as info:
        box.fork(2)
    assert info.value.error_code == "fork_short"
    client.close()


def test_bad_arguments_send_nothing(shell_client: ShellClient) -> None:
    box = Sandbox("python3", client=shell_client)
    with pytest.raises(TypeError):
        box.upload_bytes("x", "text")  # type: ignore[arg-type]
    with pytest.raises(CollimateUsageError):
        box.download("")
    with pytest.raises(CollimateUsageError):
        box.download("x", max_bytes=-1)
    with pytest.raises(CollimateUsageError):
        box.fork_group(0)
    with pytest.raises(CollimateUsageError):
        box.fork(2, labels=["a", "b"])  # labels are a gateway feature
    assert box.session_id is None and shell_client.list_sessions() == []


def test_fork_group_argument_checks(shell_client: ShellClient) -> None:
    with Sandbox("python3", client=shell_client) as box:
        with pytest.raises(CollimateUsageError):
            box.fork_group(0)
        with pytest.raises(CollimateUsageError):
            box.fork_group(2, labels=["only-one"])
        with pytest.raises(CollimateUsageError):
            box.fork_group(2, seed_mode="bogus")
        assert len(shell_client.list_sessions()) == 1


def test_fork_needs_a_forking_transport() -> None:
    class NoFork:
        def create_session(self, template_id: str, **kw: Any) -> dict[str, Any]:
            return {"session_id": "s1"}

        def delete_session(self, session_id: str) -> dict[str, Any]:
            return {"deleted": True}

    with Sandbox("python3", client=NoFork()) as box, pytest.raises(CollimateError, match="fork"):
        box.fork(2)


def test_connect_url_needs_the_gateway(shell_client: ShellClient) -> None:
    with Sandbox("python3", client=shell_client) as box, pytest.raises(CollimateError):
        box.connect_url(8080)


# ---------------------------------------------------------------- async twin


@pytest.mark.anyio
async def test_async_sandbox_round_trip_and_fork(async_client: Any) -> None:
    try:
        async with AsyncSandbox("python3", client=async_client) as box:
            data = bytes(range(256)) * 300 + b"\x00"
            await box.upload_bytes("a/b.bin", data)
            assert await box.download("a/b.bin") == data
            async with await box.fork_group(3) as group:
                assert isinstance(group, AsyncForkGroup)
                await group[0].upload_bytes("a/b.bin", b"child")
                outs = await group.exec_each(command="wc -c < a/b.bin")
                assert [r.stdout.strip() if r else "" for r in outs] == [
                    "5",
                    str(len(data)),
                    str(len(data)),
                ]
            assert await box.download("a/b.bin") == data
            sid = box.session_id
        assert sid is not None
        with pytest.raises(CollimateNotFoundError):
            await async_client.get_session(sid)
        with pytest.raises(CollimateNotFoundError):
            await AsyncSandbox.attach(async_client, sid)
    finally:
        closer = getattr(async_client, "aclose", None)
        if closer is not None:
            await closer()


class AsyncCountingBatches:
    """An async node client that counts batch requests and single execs; sheds once if asked
    (the last item of the first batch: ``at_capacity``, it did not run)."""

    def __init__(self, client: Any, shed_first: bool = False) -> None:
        self._client = client
        self.shed_first = shed_first
        self.batches = 0
        self.singles = 0

    async def exec_batch(self, items: Any) -> Any:
        self.batches += 1
        if not (self.shed_first and self.batches == 1):
            return await self._client.exec_batch(items)
        shed = CollimateCapacityError("shed", status=503, error_code="at_capacity")
        return [*(await self._client.exec_batch(items[:-1])), shed]

    async def session_exec(self, session_id: str, **kw: Any) -> Any:
        self.singles += 1
        return await self._client.session_exec(session_id, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.anyio
async def test_async_fork_group_exec_each_is_one_request_on_our_node() -> None:
    from collimate_rl.wire import AsyncCollimateClient

    from .conftest import node_or_skip

    node = node_or_skip()
    client = (
        AsyncCollimateClient(unix_socket=str(node.socket_path))
        if node.socket_path is not None
        else AsyncCollimateClient(base_url=node.base_url)
    )
    async with client:
        counting = AsyncCountingBatches(client)
        box = AsyncSandbox("python3", client=counting)
        async with box, await box.fork_group(3) as group:
            code = "import os; print(len(os.environ['COLLIMATE_SEED']))"
            results = await group.exec_each(code=code)
            assert [r.stdout if r else None for r in results] == ["64\n"] * 3
            assert (counting.batches, counting.singles) == (1, 0)
            await client.delete_session(group[1].session_id or "")
            results = await group.exec_each(command="true", on_infra_error="none")
            assert [r is None for r in results] == [False, True, False]
            with pytest.raises(CollimateNotFoundError):
                await group.exec_each(command="true")
            assert (counting.batches, counting.singles) == (3, 0)
        shedding = AsyncCountingBatches(client, shed_first=True)
        box = AsyncSandbox("python3", client=shedding)
        async with box, await box.fork_group(3) as group:
            results = await group.exec_each(command="echo ran")
        assert [r.stdout if r else None for r in results] == ["ran\n"] * 3
        assert (shedding.batches, shedding.singles) == (2, 0)


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    out = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name not in ("__enter__", "__exit__"):
            continue
        if callable(member):
            out[name] = inspect.signature(member)
    return out


@pytest.mark.parametrize(
    ("sync_cls", "async_cls"), [(Sandbox, AsyncSandbox), (ForkGroup, AsyncForkGroup)]
)
def test_sync_async_parity(sync_cls: type, async_cls: type) -> None:
    renames = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}
    sync_methods = _public_methods(sync_cls)
    async_methods = _public_methods(async_cls)
    async_methods.update(
        {k: v for k, v in inspect.getmembers(async_cls) if k in ("__aenter__", "__aexit__")}
    )
    for name, sig in sync_methods.items():
        twin = renames.get(name, name)
        assert twin in async_methods, f"{async_cls.__name__} lacks {twin}"
        twin_sig = inspect.signature(getattr(async_cls, twin))
        assert list(sig.parameters) == list(twin_sig.parameters), name
        for pname, param in sig.parameters.items():
            assert param.default == twin_sig.parameters[pname].default, (name, pname)


def test_exports() -> None:
    assert set(sandbox_pkg.__all__) == {
        name for name in dir(sandbox_pkg) if not name.startswith("_") and name != "annotations"
    } - {"_core", "_files", "_forkgroup", "_result", "_sandbox", "_shell"}


def test_default_client_comes_from_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    from .conftest import node_or_skip

    node = node_or_skip()
    if node.socket_path is not None:
        monkeypatch.setenv("COLLIMATE_SERVE_SOCKET", str(node.socket_path))
    else:
        monkeypatch.setenv("COLLIMATE_SERVE_URL", node.base_url)
    monkeypatch.delenv("COLLIMATE_API_KEY", raising=False)
    with Sandbox("python3") as box:
        assert box.exec(command="echo via-connect").stdout == "via-connect\n"
    box.client.close()


def test_template_bake_on_the_local_node() -> None:
    """`Template.bake` on a node client goes through the node's bake extension."""
    import secrets

    from collimate_rl.node import LocalNode
    from collimate_rl.templates import Ready, Template

    with LocalNode() as node:
        client = node.client()
        name = "tb-" + secrets.token_hex(3)
        handle = Template.bake(
            client, name=name, image="python3", ready=Ready(cmd="echo hi > greeting.txt"), width=4
        )
        status = handle.wait(timeout=30)
        assert status.converged and status.phase == "Live"
        with Sandbox(name, client=client) as box:
            assert box.exec(command="cat greeting.txt").stdout == "hi\n"
        assert Template.attach(client, name).status().phase == "Live"
        with pytest.raises(CollimateNotFoundError, match="no template 'never-baked'"):
            Template.attach(client, "never-baked")
