"""The public surface: exports, sync/async parity, typed models."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import collimate_rl
import collimate_rl.wire as wire
from collimate_rl.wire import (
    AsyncCollimateClient,
    AsyncGatewayClient,
    CollimateClient,
    CreateSessionResponse,
    ExecResponse,
    GatewayClient,
    Health,
    connect,
    connect_async,
)

TOP_LEVEL = {
    "connect",
    "CollimateClient",
    "AsyncCollimateClient",
    "GatewayClient",
    "AsyncGatewayClient",
    "SessionClient",
    "CollimateError",
    "CollimateDrainingError",
    "CollimateTaskError",
    "GatewayError",
    "DemoTierLimit",
    "fresh_seed",
    "group_seeds",
    "seed_from_key",
    "is_valid_seed",
    "DET_SEED",
    "__version__",
}


def test_top_level_exports() -> None:
    assert set(collimate_rl.__all__) >= TOP_LEVEL
    for name in collimate_rl.__all__:
        assert getattr(collimate_rl, name) is not None, name


@pytest.mark.parametrize("module", [wire, collimate_rl])
def test_all_names_exist_and_are_sorted_unique(module: Any) -> None:
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name


def _public(cls: type) -> dict[str, inspect.Signature]:
    skip = {"close", "aclose"}
    out = {}
    for name, member in inspect.getmembers(cls):
        if (name.startswith("_") and name != "__init__") or name in skip:
            continue
        if callable(member):
            out[name] = inspect.signature(member)
    return out


def _shape(sig: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize(
    "sync_cls, async_cls",
    [(CollimateClient, AsyncCollimateClient), (GatewayClient, AsyncGatewayClient)],
)
def test_sync_async_parity(sync_cls: type, async_cls: type) -> None:
    sync, asyn = _public(sync_cls), _public(async_cls)
    assert set(sync) == set(asyn)
    for name, sig in sync.items():
        assert _shape(sig) == _shape(asyn[name]), name
        member = getattr(async_cls, name)
        if name not in ("__init__", "from_env", "for_node_socket"):
            assert inspect.iscoroutinefunction(member), name
    assert _shape(inspect.signature(connect)) == _shape(inspect.signature(connect_async))


def test_session_surface_is_shared() -> None:
    surface = {
        "health",
        "images",
        "list_images",
        "list_sessions",
        "create_session",
        "get_session",
        "delete_session",
        "session_exec",
        "exec_once",
        "fork_session",
    }
    for cls in (CollimateClient, GatewayClient):
        assert surface <= set(_public(cls)), cls
    daemon, gateway = _public(CollimateClient), _public(GatewayClient)
    for name in surface:
        assert _shape(daemon[name]) == _shape(gateway[name]), name


def test_contract_constructor_defaults() -> None:
    sig = inspect.signature(CollimateClient)
    assert sig.parameters["base_url"].default == "http://127.0.0.1:8080"
    for name, default in (
        ("timeout", 120.0),
        ("retries", 3),
        ("backoff", 0.15),
        ("retry_budget", 30.0),
    ):
        assert sig.parameters[name].default == default
        assert inspect.signature(GatewayClient).parameters[name].default == default
    client = CollimateClient()
    assert (client.timeout, client.retries, client.backoff, client.retry_budget) == (
        120.0,
        3,
        0.15,
        30.0,
    )


def test_models_read_like_dicts() -> None:
    raw = {"stdout": "x", "exit_code": "3", "seed": None, "extra": [1]}
    resp = ExecResponse.from_raw(raw)
    assert resp.exit_code == 3 and resp.seed is None and resp["extra"] == [1]
    assert dict(resp) == raw and len(resp) == 4 and list(resp) == list(raw)
    assert resp.get("missing", "d") == "d" and "stdout" in resp and "stderr" not in resp
    with pytest.raises(KeyError):
        resp["stderr"]
    with pytest.raises(AttributeError):
        resp.stdout = "y"  # type: ignore[misc]
    assert CreateSessionResponse.from_raw({}).session_id is None
    assert Health.from_raw({"templates": "not-a-list"}).templates == ()
