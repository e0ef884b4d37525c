"""Malformed input always gets the ``{error, error_code}`` envelope, never a 500 or a traceback."""

from __future__ import annotations

import json

import httpx
import pytest

from .conftest import ThreadedNode
from .test_node_contract import assert_envelope


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/sessions", b"{not json"),
        ("/v1/sessions", b""),
        ("/v1/sessions", b"[1, 2]"),
        ("/v1/sessions", b'"a string"'),
        ("/v1/exec", b"{"),
        ("/v1/exec", b"\xff\xfe"),
        ("/v1/sessions/ses_x/exec", b"null"),
        ("/v1/sessions/ses_x/fork", b"{]"),
    ],
)
def test_malformed_json(http: httpx.Client, path: str, body: bytes) -> None:
    resp = http.post(path, content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error_code"] in ("bad_request", "template_id_required")


@pytest.mark.parametrize(
    "body",
    [
        {"template_id": 5},
        {"template_id": ""},
        {"template_id": None},
        {"template_id": ["python3"]},
    ],
)
def test_create_wrong_types(http: httpx.Client, body: object) -> None:
    resp = http.post("/v1/sessions", json=body)
    assert resp.status_code == 400
    assert resp.json()["error_code"] in ("bad_request", "template_id_required")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"timeout_seconds": 30},
        {"command": 5},
        {"command": "true", "timeout_seconds": 0},
        {"command": "true", "timeout_seconds": 3601},
        {"command": "true", "timeout_seconds": "soon"},
        {"command": "true", "timeout_seconds": 1.5},
        {"commands": []},
        {"commands": [[]]},
        {"commands": "echo"},
        {"commands": [["echo", 1]]},
        {"code": "1", "files": [{"path": "a"}]},
        {"code": "1", "files": [{"path": "", "content": "x"}]},
        {"code": "1", "files": [{"path": "a\x00b", "content": "x"}]},
        {"code": "1", "files": {"path": "a", "content": "x"}},
    ],
)
def test_exec_bad_bodies(http: httpx.Client, template: str, body: dict[str, object]) -> None:
    resp = http.post("/v1/exec", json={"template_id": template, **body})
    assert_envelope(resp, 400, "bad_request")


@pytest.mark.parametrize("seed", ["", "g" * 64, "a" * 63, "a" * 65, 12, " " + "a" * 63])
def test_bad_seed(http: httpx.Client, template: str, seed: object) -> None:
    resp = http.post("/v1/exec", json={"template_id": template, "command": "true", "seed": seed})
    assert_envelope(resp, 400, "invalid_seed")


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded", "text/plain"])
def test_body_is_json_whatever_the_content_type(
    http: httpx.Client, template: str, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    body = json.dumps({"template_id": template, "command": "echo ok"}).encode()
    resp = http.post("/v1/exec", content=body, headers=headers)
    assert resp.status_code == 200, resp.text
    assert resp.json()["stdout"] == "ok\n"


def test_unknown_routes_and_methods(http: httpx.Client) -> None:
    assert_envelope(http.get("/v2/nothing"), 404, "not_found")
    assert_envelope(http.get("/"), 404, "not_found")
    assert_envelope(http.post("/v1/sessions/a/b/c", json={}), 404, "not_found")
    resp = http.put("/v1/health")
    assert_envelope(resp, 405, "method_not_allowed")
    assert "GET" in resp.headers.get("allow", "")
    assert_envelope(http.patch("/v1/sessions"), 405, "method_not_allowed")
    assert_envelope(http.get("/v1/exec"), 405, "method_not_allowed")


def test_escape_attempt_in_file_path_is_400_not_500(http: httpx.Client, template: str) -> None:
    resp = http.post(
        "/v1/exec",
        json={
            "template_id": template,
            "command": "true",
            "files": [{"path": "../../etc/evil", "content": "x"}],
        },
    )
    assert resp.status_code < 500, resp.text
    assert "error_code" in resp.json() or resp.json()["exit_code"] is not None


def test_payload_too_large(node_factory: object) -> None:
    from collections.abc import Callable

    assert callable(node_factory)
    make: Callable[..., ThreadedNode] = node_factory
    node = make(max_body_bytes=1000)
    with node.client() as http:
        resp = http.post("/v1/exec", json={"template_id": "python3", "code": "x" * 2000})
        assert_envelope(resp, 413, "payload_too_large")


def test_openapi_schema_is_served(http: httpx.Client) -> None:
    schema = http.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/v1/health",
        "/v1/sessions",
        "/v1/sessions/{session_id}",
        "/v1/sessions/{session_id}/exec",
        "/v1/sessions/{session_id}/fork",
        "/v1/exec",
    ):
        assert path in paths
    assert all("422" not in op["responses"] for p in paths.values() for op in p.values())
