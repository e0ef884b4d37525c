"""The node package's public surface: exports, CLI flags, small helpers."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import collimate_rl.node as node_pkg
from collimate_rl.node.core import NodeConfig, build_exec_spec, choose_egress
from collimate_rl.node.egress import NONE, OPEN, EgressPolicy
from collimate_rl.node.errors import NodeError
from collimate_rl.node.models import ExecRequest, FileSpec
from collimate_rl.node.server import build_parser, config_from_args, make_runtime

from . import fakes

MODULES = [
    "collimate_rl.node",
    "collimate_rl.node.admission",
    "collimate_rl.node.app",
    "collimate_rl.node.core",
    "collimate_rl.node.errors",
    "collimate_rl.node.local",
    "collimate_rl.node.models",
    "collimate_rl.node.server",
    "collimate_rl.node.sessions",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_exports_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__, name
    for export in module.__all__:
        assert getattr(module, export) is not None, f"{name}.{export}"


def test_package_exports() -> None:
    assert set(node_pkg.__all__) == {"LocalNode", "serve"}
    from collimate_rl.node.server import serve

    assert node_pkg.serve is serve
    with pytest.raises(AttributeError):
        _ = node_pkg.nothing_here


def test_the_apps_routes_are_matched_directly() -> None:
    # an included router is matched through a wrapper since FastAPI 0.137 (~50 us a request)
    from fastapi.routing import APIRoute

    from collimate_rl.node.app import create_app, router

    app = create_app(fakes.create_fake_runtime(), manage_lifecycle=False)
    direct = [route for route in app.routes if isinstance(route, APIRoute)]
    assert {id(route) for route in router.routes} <= {id(route) for route in direct}
    assert {"/v1/sessions/{session_id}/exec", "/v1/exec", "/v1/exec/batch"} <= {
        route.path for route in direct
    }


def test_parser_defaults_and_flags() -> None:
    args = build_parser().parse_args([])
    assert (args.host, args.port, args.socket, args.isolation) == ("127.0.0.1", 8080, None, "auto")
    args = build_parser().parse_args(
        [
            "--socket",
            "/tmp/x.sock",
            "--isolation",
            "none",
            "--state-dir",
            "/tmp/s",
            "--max-inflight",
            "3",
            "--queue",
            "0",
            "--max-sessions",
            "9",
            "--session-ttl",
            "0",
            "--pool-size",
            "0",
            "--drain-timeout",
            "2.5",
        ]
    )
    config = config_from_args(args)
    assert config == NodeConfig(
        max_inflight=3,
        queue=0,
        max_sessions=9,
        session_ttl=None,
        pool_size=0,
        drain_timeout=2.5,
    )
    with pytest.raises(SystemExit):
        config_from_args(build_parser().parse_args(["--max-inflight", "0"]))
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--isolation", "docker"])


def test_module_entry_point_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "collimate_rl.node"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2 and "serve" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "collimate_rl.node", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    for flag in ("--socket", "--isolation", "--max-inflight", "--queue", "--session-ttl"):
        assert flag in proc.stdout


def test_make_runtime_from_factory_string(tmp_path: Path) -> None:
    runtime = make_runtime(
        "none", state_dir=tmp_path, factory=f"{fakes.__name__}:create_fake_runtime"
    )
    assert isinstance(runtime, fakes.FakeRuntime)


def test_exec_spec_precedence_and_seed() -> None:
    spec = build_exec_spec(
        ExecRequest(
            command="a", commands=[["b"]], code="c", files=[FileSpec(path="f", content="é")]
        )
    )
    assert (spec.command, spec.commands, spec.code) == ("a", None, None)
    assert spec.files == (("f", "é".encode()),)
    spec = build_exec_spec(ExecRequest(commands=[["b", "c d"]], code="c", seed="AA" * 32))
    assert spec.commands == (("b", "c d"),) and spec.seed == "aa" * 32
    with pytest.raises(NodeError) as info:
        build_exec_spec(ExecRequest())
    assert info.value.code == "bad_request" and info.value.status == 400


def test_egress_policy() -> None:
    preset = EgressPolicy.model_validate({"preset": "rl-leakage"})
    assert choose_egress("python3", None, networked=False) is None
    assert choose_egress("python3", EgressPolicy(mode="none"), networked=False) is None
    with pytest.raises(NodeError) as info:
        choose_egress("python3", preset, networked=False)
    assert info.value.status == 400 and "template is vsock-only" in info.value.message
    assert choose_egress("python3-net", None, networked=True) == OPEN
    assert choose_egress("t", None, networked=True, default=preset) == preset
    assert choose_egress("t", NONE, networked=True, default=preset) == NONE


# -- the bake extension (POST /v1/templates) ---------------------------------------------


def test_bake_creates_a_template_sessions_start_from() -> None:
    import secrets

    import httpx

    from collimate_rl.node import LocalNode

    # A private node: baking changes the node's template list.
    with LocalNode() as node:
        http = node.http()
        name = "baked-" + secrets.token_hex(3)
        resp = http.post(
            "/v1/templates",
            json={"template_id": name, "setup": ["echo from-the-bake > /sandbox/marker.txt"]},
        )
        assert resp.status_code == 201, resp.text
        assert name in resp.json()["templates"]
        client = node.client()
        assert name in client.templates()
        out = client.exec_once(name, command="cat marker.txt")
        assert out["stdout"] == "from-the-bake\n"
        again = http.post("/v1/templates", json={"template_id": name, "setup": ["true"]})
        assert (again.status_code, again.json()["error_code"]) == (409, "template_exists")
        failed = http.post("/v1/templates", json={"template_id": name + "x", "setup": ["exit 3"]})
        assert (failed.status_code, failed.json()["error_code"]) == (400, "bake_failed")
        unknown = http.post(
            "/v1/templates", json={"template_id": name + "y", "base": "nope", "setup": ["true"]}
        )
        assert (unknown.status_code, unknown.json()["error_code"]) == (404, "no_template")
        assert isinstance(http, httpx.Client)
