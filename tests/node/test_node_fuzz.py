"""Fuzz the HTTP API from its own OpenAPI schema (schemathesis): no 5xx, no crash, conforming answers.

Runs in-process against the ASGI app. With the real bwrap runtime the
generated commands run sandboxed; otherwise the fake runtime does not run them
at all (dry run), because fuzzed shell text must never execute unsandboxed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.generation.modes import GenerationMode  # noqa: E402
from schemathesis.specs.openapi import checks as openapi_checks  # noqa: E402

from collimate_rl.node.app import create_app  # noqa: E402
from collimate_rl.node.core import NodeConfig  # noqa: E402
from collimate_rl.node.image_templates import ImageSettings  # noqa: E402

from .conftest import _pick_runtime  # noqa: E402
from .fakes import FakeRuntime  # noqa: E402


@pytest.fixture
def api_schema() -> Iterator[Any]:
    tmp = Path(tempfile.mkdtemp(prefix="node-fuzz-"))
    factory, kind = _pick_runtime()
    # Only a sandboxing runtime may run fuzzed text; "real:none" is not one.
    sandboxed = kind.startswith("real") and not kind.endswith(":none")
    runtime = (
        factory(state_dir=tmp / "state")
        if sandboxed
        else FakeRuntime(state_dir=tmp / "state", dry_run=True)
    )
    # fuzzed image references go to a store of the test's own (and a registry out of reach
    # answers upstream_error, see _check)
    images = ImageSettings(store_dir=tmp / "images")
    config = NodeConfig(max_inflight=4, queue=16, max_sessions=64, pool_size=1, images=images)
    app = create_app(runtime, config)
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    shutil.rmtree(tmp, ignore_errors=True)


def _call(api_schema: Any, method: str, path: str, **kwargs: Any) -> Any:
    return api_schema[path][method].Case(**kwargs).call()


def _check(case: Any) -> None:
    if isinstance(case.body, dict):
        # Keep generated work small: the schema allows an hour and 256-way forks.
        if "timeout_seconds" in case.body:
            case.body["timeout_seconds"] = 2
        if isinstance(case.body.get("count"), int) and case.body["count"] > 4:
            case.body["count"] = 4
    response = case.call()
    assert response.status_code < 500 or (
        (response.status_code, response.json().get("error_code"))
        in ((503, "at_capacity"), (503, "draining"), (502, "upstream_error"))
    ), f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text}"
    if response.status_code >= 400:
        body = response.json()
        assert {"error", "error_code"} <= set(body), body
    case.validate_response(
        response,
        checks=[
            openapi_checks.status_code_conformance,
            openapi_checks.content_type_conformance,
            openapi_checks.response_schema_conformance,
        ],
    )


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_api_never_5xx(api_schema: Any, mode: str) -> None:
    strategy = api_schema.as_strategy(GenerationMode(mode))
    template = "python3"

    @given(case=strategy, live_session=st.booleans(), real_template=st.booleans())
    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any, live_session: bool, real_template: bool) -> None:
        # Random ids almost never name a live session or template; half the
        # time, point the case at real ones so the success paths are fuzzed too.
        sid = None
        if live_session and "session_id" in (case.path_parameters or {}):
            created = _call(api_schema, "POST", "/v1/sessions", body={"template_id": template})
            if created.status_code == 201:
                sid = created.json()["session_id"]
                case.path_parameters["session_id"] = sid
        if real_template and isinstance(case.body, dict) and "template_id" in case.body:
            case.body["template_id"] = template
        try:
            _check(case)
        finally:
            if sid is not None:
                _call(
                    api_schema,
                    "DELETE",
                    "/v1/sessions/{session_id}",
                    path_parameters={"session_id": sid},
                )

    run()
