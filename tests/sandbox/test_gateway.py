"""Gateway paths: Sandbox over GatewayClient, fork chunking, environments, bakes."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from typing import Any

import pytest

from collimate_rl.errors import (
    CollimateNotFoundError,
    CollimateUsageError,
    GatewayError,
)
from collimate_rl.sandbox import AsyncSandbox, Sandbox
from collimate_rl.sandbox._shell import ShellClient
from collimate_rl.templates import (
    AsyncEnv,
    AsyncTemplate,
    AsyncTemplateHandle,
    Env,
    Ready,
    Template,
    TemplateBakeFailed,
    TemplateHandle,
    TemplateStatus,
    environment,
    environment_async,
)
from collimate_rl.wire import AsyncGatewayClient, GatewayClient

from ._gateway import FakeGateway

SECRET = "s" * 32


def key(tier: str) -> str:
    return f"col_{tier}_abcd1234_{SECRET}"


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> Iterator[tuple[FakeGateway, GatewayClient]]:
    tier = getattr(request, "param", "demo")
    fake = FakeGateway(key(tier))
    server, url = fake.serve()
    client = GatewayClient(key(tier), base_url=url, retries=0)
    yield fake, client
    client.close()
    server.shutdown()
    server.server_close()
    fake.close()


def sandbox_ids(fake: FakeGateway) -> set[str]:
    return {row["session_id"] for row in fake.shell.list_sessions()}


def paths(fake: FakeGateway, method: str) -> list[str]:
    return [path for m, path, _ in fake.calls if m == method]


# ---------------------------------------------------------------- sandboxes


def test_sandbox_over_the_gateway(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    _fake, client = gateway
    data = os.urandom(300_000) + b"\x00"
    with pytest.raises(RuntimeError), Sandbox("python3", client=client) as box:
        sid = box.session_id
        assert box.warm_hit  # the fake reports fork_time_ms 0.4
        box.upload_bytes("x/y.bin", data)
        assert box.download("x/y.bin") == data
        assert box.exec(command="echo hi").stdout == "hi\n"
        raise RuntimeError("boom")
    assert sid is not None
    with pytest.raises(CollimateNotFoundError):
        client.get_session(sid)
    with pytest.raises(GatewayError) as info:
        Sandbox.attach(client, sid)
    assert info.value.status == 404


def test_attach_on_the_gateway(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    fake, client = gateway
    sid = client.create_sandbox("python3")["id"]
    with Sandbox.attach(client, sid) as box:
        assert box.template == "python3"
    assert sid not in sandbox_ids(fake)


def test_label_and_secrets_go_to_create_sandbox(
    gateway: tuple[FakeGateway, GatewayClient],
) -> None:
    fake, client = gateway
    with Sandbox("python3", client=client, label="run-1", secret_refs=["HF_TOKEN"]):
        pass
    body = next(b for m, p, b in fake.calls if m == "POST" and p == "/v1/sandboxes")
    assert body["label"] == "run-1" and body["secret_refs"] == ["HF_TOKEN"]
    with pytest.raises(CollimateUsageError):
        Sandbox("python3", client=ShellClient(), label="x").start()


@pytest.mark.parametrize(
    ("gateway", "width", "max_per_call", "calls"),
    [
        ("demo", 10, None, [4, 4, 2]),
        ("pro", 10, None, [10]),
        ("pro", 70, None, [32, 32, 6]),
        ("ent", 70, None, [64, 6]),
        ("ent", 5, 2, [2, 2, 1]),
    ],
    indirect=["gateway"],
)
def test_fork_group_chunks_to_the_tier_cap(
    gateway: tuple[FakeGateway, GatewayClient],
    width: int,
    max_per_call: int | None,
    calls: list[int],
) -> None:
    fake, client = gateway
    with Sandbox("python3", client=client) as box:
        box.exec(command="echo parent > f")
        with box.fork_group(width, max_per_call=max_per_call) as group:
            assert fake.fork_counts == calls
            assert len(group) == width
            assert len({c.session_id for c in group}) == width
            assert group[width - 1].exec(command="cat f").stdout == "parent\n"
        assert sandbox_ids(fake) == {box.session_id}


def test_fork_group_labels_are_chunked(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    fake, client = gateway
    labels = [f"l{i}" for i in range(6)]
    with Sandbox("python3", client=client) as box, box.fork_group(6, labels=labels):
        bodies = [b for m, p, b in fake.calls if m == "POST" and p.endswith("/fork")]
        assert [b["labels"] for b in bodies] == [labels[:4], labels[4:]]


def test_fork_group_failure_mid_way_leaves_no_children(
    gateway: tuple[FakeGateway, GatewayClient],
) -> None:
    fake, client = gateway
    fake.fail_fork_call = 1
    with Sandbox("python3", client=client) as box:
        with pytest.raises(GatewayError) as info:
            box.fork_group(10)
        assert info.value.error_code == "upstream_error"
        assert fake.fork_counts == [4, 4]
        assert sandbox_ids(fake) == {box.session_id}
        assert len(paths(fake, "DELETE")) == 4


# ------------------------------------------------------------- environments


def test_env_public_catalog_inherits(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    fake, client = gateway
    with environment(client, "python3", width=8) as env:
        assert isinstance(env, Env) and env.id == "python3" and not env.releasable
        with env.sandbox() as box:
            assert box.exec(command="echo ok").stdout == "ok\n"
    assert not any("/expect" in p or "/release" in p for _, p, _ in fake.calls)
    assert paths(fake, "GET").count("/v1/images") == 1


def test_env_resolves_a_catalog_name(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    _, client = gateway
    assert environment(client, "python").id == "python3"


def test_env_plain_handle_skips_images_when_named(
    gateway: tuple[FakeGateway, GatewayClient],
) -> None:
    fake, client = gateway
    env = environment(client, "anything", name="n")
    assert env.id == "anything" and not env.releasable
    assert "/v1/images" not in paths(fake, "GET")


def test_env_overrides_on_catalog_bake(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    fake, client = gateway
    with environment(
        client, "python3", width=4, ready=Ready(cmd="true"), env={"A": "1"}, secrets=["TOKEN"]
    ) as env:
        assert env.releasable and env.id.startswith("tpl-")
        assert env.secret_refs == ["TOKEN"]
        body = next(b for m, p, b in fake.calls if m == "POST" and p == "/v1/templates")
        assert body["pool"] == {"width": 4} and body["expected_width"] == 4
        assert body["ready"] == {"cmd": "true", "env": {"A": "1"}}
        assert "TOKEN" not in str(body)
        assert env.wait(timeout=5, poll_interval=0.001).converged
        with env.sandbox(secret_refs=["EXTRA"]) as box:
            assert box.exec(command="true").ok
        create = [b for m, p, b in fake.calls if m == "POST" and p == "/v1/sandboxes"][-1]
        assert create["secret_refs"] == ["TOKEN", "EXTRA"]
    env.release()  # at most once
    assert sum(p.endswith("/release") for _, p, _ in fake.calls) == 1


def test_env_owned_template_declares_and_releases(
    gateway: tuple[FakeGateway, GatewayClient],
) -> None:
    fake, client = gateway
    with environment(client, "tpl-own", width=16, ready=Ready(cmd="ignored")) as env:
        assert env.releasable
        expect = next(b for m, p, b in fake.calls if p == "/v1/templates/tpl-own/expect")
        assert expect == {"width": 16}
        assert not any(p == "/v1/templates" for _, p, _ in fake.calls)
    assert any(p == "/v1/templates/tpl-own/release" for _, p, _ in fake.calls)


def test_env_raw_id_without_width_is_not_releasable(
    gateway: tuple[FakeGateway, GatewayClient],
) -> None:
    fake, client = gateway
    with environment(client, "raw-id") as env:
        assert env.id == "raw-id" and not env.releasable
    assert not any("/release" in p or "/expect" in p for _, p, _ in fake.calls)


def test_env_release_swallows_errors(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    _, _client = gateway

    class Broken:
        def release_template(self, template_id: str) -> None:
            raise GatewayError("down", status=503)

    env = Env(Broken(), "t", releasable=True)
    env.release()
    env.release()


def test_env_on_the_real_node(node_client: Any) -> None:
    with environment(node_client, "python3", width=4) as env:
        assert env.id == "python3" and not env.releasable
        with env.sandbox() as box:
            assert box.exec("print('node')").stdout == "node\n"
    with pytest.raises(CollimateNotFoundError, match="python3"):
        environment(node_client, "no-such-template")


def test_env_on_the_node_double() -> None:
    client = ShellClient()
    try:
        with environment(client, "python3", width=64) as env:
            assert env.id == "python3" and not env.releasable
            with env.sandbox() as box:
                assert box.exec(command="true").ok
        with pytest.raises(CollimateUsageError, match="gateway"):
            environment(client, "python3", ready=Ready(cmd="pip install x"))
        with pytest.raises(CollimateUsageError, match="gateway"):
            Template.bake(client, name="n", image="i", width=1)
    finally:
        client.close()


def test_client_env_is_environment(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    """``client.env(...)`` (a wire method) makes the templates layer's Env, same decisions."""
    fake, client = gateway
    with client.env("python3", width=4, ready=Ready(cmd="true"), secrets=["T"]) as env:
        assert isinstance(env, Env) and env.releasable and env.secret_refs == ["T"]
        with env.sandbox() as box:
            assert box.exec(command="echo via-client").stdout == "via-client\n"
    assert sum(p.endswith("/release") for _, p, _ in fake.calls) == 1


def test_client_env_on_the_real_node(node_client: Any) -> None:
    with node_client.env("python3", width=2) as env:
        assert isinstance(env, Env) and env.id == "python3" and not env.releasable


@pytest.mark.anyio
async def test_async_client_env_is_environment_async() -> None:
    fake = FakeGateway(key("demo"))
    server, url = fake.serve()
    client = AsyncGatewayClient(key("demo"), base_url=url, retries=0)
    try:
        async with await client.env("python3", width=2, name="n") as env:
            assert isinstance(env, AsyncEnv) and env.id == "python3"
    finally:
        await client.aclose()
        server.shutdown()
        server.server_close()
        fake.close()


def test_client_env_without_the_templates_layer_says_what_to_do(
    gateway: tuple[FakeGateway, GatewayClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    from collimate_rl.wire import _environments

    monkeypatch.setattr(_environments, "_provided", [])
    _, client = gateway
    with pytest.raises(CollimateUsageError, match="import collimate_rl"):
        client.env("python3")


# -------------------------------------------------------------------- bakes


def test_bake_and_wait_converges(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    _, client = gateway
    handle = Template.bake(
        client, name="mine", image="python:3.12", ready=Ready(cmd="true"), width=3
    )
    assert isinstance(handle, TemplateHandle) and handle.declared == 3
    seen: list[TemplateStatus] = []
    status = handle.wait(timeout=5, poll_interval=0.001, on_update=seen.append)
    assert status.converged and status.phase == "Live" and status.declared == 3
    assert [s.phase for s in seen] == ["Pending", "Converting", "Distributing", "Live"]
    assert [s.phase_rank for s in seen] == [0, 1, 2, 3]
    assert status.total == 3 and status.per_node[0]["node"] == "n1"
    again = Template.attach(client, handle.id)
    assert again.name == "mine" and again.image == "python:3.12"


@pytest.fixture
def handle_for(
    gateway: tuple[FakeGateway, GatewayClient],
) -> Iterator[Any]:
    fake, client = gateway

    def make(tid: str, *statuses: dict[str, Any]) -> TemplateHandle:
        fake.scripts[tid] = list(statuses)
        return TemplateHandle(client, tid, declared=2)

    yield make


def test_wait_fail_fast_on_failed_phase(handle_for: Any) -> None:
    handle = handle_for(
        "tb",
        {"phase": "Converting"},
        {"phase": "Failed", "error": "pull failed", "build_fails": 2},
    )
    with pytest.raises(TemplateBakeFailed) as info:
        handle.wait(timeout=5, poll_interval=0.001)
    err = info.value
    assert "after 2 attempt(s): pull failed" in str(err)
    assert err.error_code == "bake_failed" and isinstance(err, GatewayError)
    assert isinstance(err.status, TemplateStatus) and err.status.failed
    assert err.template_status is err.status


def test_wait_without_fail_fast_times_out(handle_for: Any) -> None:
    handle = handle_for("tc", {"phase": "Failed", "error": "stale"})
    with pytest.raises(TimeoutError, match="did not converge to width 2"):
        handle.wait(timeout=0.05, poll_interval=0.01, fail_fast=False)


def test_wait_converged_beats_stale_error(handle_for: Any) -> None:
    handle = handle_for(
        "td", {"phase": "Failed", "error": "old", "converge_state": "converged", "warm": 2}
    )
    assert handle.wait(timeout=1, poll_interval=0.001).converged


def test_wait_on_vanished_template(gateway: tuple[FakeGateway, GatewayClient]) -> None:
    _, client = gateway
    with pytest.raises(TemplateBakeFailed, match="not found during bake") as info:
        TemplateHandle(client, "tpl-missing").wait(timeout=1, poll_interval=0.001)
    assert info.value.status.phase == "Failed"


def test_ready_wire_shapes() -> None:
    assert Ready().to_wire() is None and not Ready()
    assert Ready(ports=[8080], env={"K": "V"}, http_timeout_s=30).to_wire() == {
        "http_timeout_s": 30,
        "ports": [8080],
        "env": {"K": "V"},
    }


# ---------------------------------------------------------------- async twins


@pytest.mark.anyio
async def test_async_env_bake_and_fork_on_the_gateway() -> None:
    fake = FakeGateway(key("demo"))
    server, url = fake.serve()
    client = AsyncGatewayClient(key("demo"), base_url=url, retries=0)
    try:
        async with await environment_async(
            client, "python3", width=2, ready=Ready(cmd="true"), secrets=["T"]
        ) as env:
            assert isinstance(env, AsyncEnv) and env.releasable
            assert (await env.wait(timeout=5, poll_interval=0.001)).converged
            async with env.sandbox() as box:
                assert isinstance(box, AsyncSandbox)
                await box.upload_bytes("f.bin", b"\x00async")
                async with await box.fork_group(6) as group:
                    assert fake.fork_counts == [4, 2]
                    outs = await group.exec_each(command="cat f.bin | wc -c")
                    assert {r.stdout.strip() for r in outs if r} == {"6"}
        assert sum(p.endswith("/release") for _, p, _ in fake.calls) == 1
        handle = await AsyncTemplate.bake(client, name="n", image="python:3.12", width=1)
        assert isinstance(handle, AsyncTemplateHandle)
        assert (await handle.wait(timeout=5, poll_interval=0.001)).phase == "Live"
        assert (await AsyncTemplate.attach(client, handle.id)).name == "n"
    finally:
        await client.aclose()
        server.shutdown()
        server.server_close()
        fake.close()


def _signatures(cls: type) -> dict[str, list[tuple[str, Any]]]:
    out = {}
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__enter__", "__exit__"):
            continue
        func = member.__func__ if isinstance(member, staticmethod) else member
        if callable(func):
            sig = inspect.signature(func)
            out[name] = [(p.name, p.default) for p in sig.parameters.values()]
    return out


@pytest.mark.parametrize(
    ("sync_cls", "async_cls"),
    [(Template, AsyncTemplate), (TemplateHandle, AsyncTemplateHandle), (Env, AsyncEnv)],
)
def test_template_sync_async_parity(sync_cls: type, async_cls: type) -> None:
    renames = {"__enter__": "__aenter__", "__exit__": "__aexit__"}
    sync_sigs, async_sigs = _signatures(sync_cls), _signatures(async_cls)
    async_sigs.update(
        {
            k: [(p.name, p.default) for p in inspect.signature(v).parameters.values()]
            for k, v in vars(async_cls).items()
            if k in ("__aenter__", "__aexit__")
        }
    )
    for name, params in sync_sigs.items():
        assert async_sigs.get(renames.get(name, name)) == params, name
    env_params = inspect.signature(environment).parameters
    assert list(env_params) == list(inspect.signature(environment_async).parameters)
