"""The daemon contract (section 1) against a real node over real HTTP, TCP and unix socket."""

from __future__ import annotations

import functools
import re

import httpx
import pytest

from collimate_rl import __version__
from collimate_rl.errors import ERROR_CODES

from .conftest import ThreadedNode

HEX64 = re.compile(r"[0-9a-f]{64}")


def create(http: httpx.Client, template: str) -> str:
    resp = http.post("/v1/sessions", json={"template_id": template})
    assert resp.status_code == 201, resp.text
    sid: str = resp.json()["session_id"]
    return sid


def assert_envelope(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error_code"] == code
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in body["error"]
    if code in ERROR_CODES:
        assert ERROR_CODES[code][0] == status


def test_health_shape(http: httpx.Client, shared_node: ThreadedNode) -> None:
    for path in ("/v1/health", "/health"):
        body = http.get(path).json()
        assert body["status"] == "ok"
        assert body["version"] == __version__
        assert body["isolation"] in ("bwrap", "none")
        assert isinstance(body["templates"], list) and body["templates"]
        for key in ("sessions", "running", "max_inflight", "queued"):
            assert isinstance(body[key], int)
        assert body["max_inflight"] == 8


def test_session_lifecycle(http: httpx.Client, template: str) -> None:
    resp = http.post("/v1/sessions", json={"template_id": template})
    assert resp.status_code == 201
    created = resp.json()
    assert set(created) == {"session_id", "template_id", "fork_time_ms", "create_time_ms"}
    sid = created["session_id"]
    assert sid.startswith("ses_") and created["template_id"] == template

    info = http.get(f"/v1/sessions/{sid}").json()
    assert set(info) == {"session_id", "template_id", "age_secs", "idle_secs", "exec_count"}
    assert info["exec_count"] == 0
    listed = http.get("/v1/sessions").json()
    assert isinstance(listed, list) and sid in {s["session_id"] for s in listed}

    out = http.post(f"/v1/sessions/{sid}/exec", json={"command": "echo hi; echo err >&2"})
    assert out.status_code == 200, out.text
    body = out.json()
    assert body["stdout"] == "hi\nerr\n" and body["stderr"] == "" and body["exit_code"] == 0
    assert re.fullmatch(r"req_[0-9a-f]{16}", body["id"])
    for key in ("fork_time_ms", "exec_time_ms", "total_time_ms"):
        assert isinstance(body[key], float | int) and body[key] >= 0
    assert "truncated" not in body
    assert http.get(f"/v1/sessions/{sid}").json()["exec_count"] == 1

    deleted = http.delete(f"/v1/sessions/{sid}")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True, "session_id": sid}
    again = http.delete(f"/v1/sessions/{sid}")
    assert_envelope(again, 404, "no_such_session")
    assert again.json()["deleted"] is False and again.json()["session_id"] == sid
    assert_envelope(http.get(f"/v1/sessions/{sid}"), 404, "no_such_session")
    assert_envelope(
        http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}), 404, "no_such_session"
    )


def test_warm_pool_hit(http: httpx.Client, template: str, shared_node: ThreadedNode) -> None:
    # The pool was filled in the background at start; wait until it is ready.
    import time

    deadline = time.monotonic() + 30
    while shared_node.node.sessions.pooled(template) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    resp = http.post("/v1/sessions", json={"template_id": template}).json()
    assert 0 <= resp["fork_time_ms"] <= 1.0
    http.delete(f"/v1/sessions/{resp['session_id']}")


def test_files_are_exact_and_persist(http: httpx.Client, template: str) -> None:
    sid = create(http, template)
    content = "line one\nno newline at end ✓"
    resp = http.post(
        f"/v1/sessions/{sid}/exec",
        json={"files": [{"path": "sub/a.txt", "content": content}], "command": "cat sub/a.txt"},
    ).json()
    assert resp["stdout"] == content
    # Files persist across execs in one session.
    again = http.post(f"/v1/sessions/{sid}/exec", json={"command": "wc -c < sub/a.txt"}).json()
    assert int(again["stdout"]) == len(content.encode())
    http.delete(f"/v1/sessions/{sid}")


def test_precedence_and_commands(http: httpx.Client, template: str) -> None:
    sid = create(http, template)
    both = http.post(
        f"/v1/sessions/{sid}/exec",
        json={"command": "echo cmd", "commands": [["echo", "argv"]], "code": "print('code')"},
    ).json()
    assert both["stdout"] == "cmd\n"
    argv = http.post(
        f"/v1/sessions/{sid}/exec",
        json={"commands": [["echo", "hi there"], ["echo", "b"]], "code": "print('code')"},
    ).json()
    assert argv["stdout"] == "hi there\nb\n"
    code = http.post(f"/v1/sessions/{sid}/exec", json={"code": "import sys; sys.exit(3)"}).json()
    assert code["exit_code"] == 3
    http.delete(f"/v1/sessions/{sid}")


def test_seed_echo_and_fresh_seed(http: httpx.Client, template: str) -> None:
    sid = create(http, template)
    seed = "0123456789abcdef" * 4
    resp = http.post(
        f"/v1/sessions/{sid}/exec",
        json={"code": "import random; print(random.random())", "seed": seed.upper()},
    ).json()
    assert resp["seed"] == seed
    assert isinstance(resp["seed_ack"], str) and resp["seed_ack"]
    again = http.post(
        f"/v1/sessions/{sid}/exec",
        json={"code": "import random; print(random.random())", "seed": seed},
    ).json()
    assert again["stdout"] == resp["stdout"]  # same seed, same draws
    fresh = [
        http.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}).json()["seed"]
        for _ in range(2)
    ]
    assert all(HEX64.fullmatch(s) for s in fresh) and fresh[0] != fresh[1]
    bad = http.post(f"/v1/sessions/{sid}/exec", json={"command": "true", "seed": "xyz"})
    assert_envelope(bad, 400, "invalid_seed")
    short = http.post("/v1/exec", json={"template_id": template, "code": "1", "seed": "ab" * 31})
    assert_envelope(short, 400, "invalid_seed")
    http.delete(f"/v1/sessions/{sid}")


def test_timeout(http: httpx.Client, template: str) -> None:
    resp = http.post(
        "/v1/exec", json={"template_id": template, "command": "sleep 30", "timeout_seconds": 1}
    )
    assert resp.status_code == 200
    body = resp.json()
    assert body["exit_code"] == -1
    assert re.search(r"timeout after 1(\.0)?s", body["stdout"])
    assert body["total_time_ms"] < 15000


def test_one_shot_leaves_no_session(http: httpx.Client, template: str) -> None:
    before = {s["session_id"] for s in http.get("/v1/sessions").json()}
    for path in ("/v1/exec", "/exec"):
        resp = http.post(path, json={"template_id": template, "code": "print(6 * 7)"})
        assert resp.status_code == 200, resp.text
        assert resp.json()["stdout"] == "42\n"
    after = {s["session_id"] for s in http.get("/v1/sessions").json()}
    assert after == before


def test_one_shot_errors(http: httpx.Client) -> None:
    assert_envelope(http.post("/v1/exec", json={"code": "1"}), 400, "template_id_required")
    assert_envelope(
        http.post("/v1/exec", json={"template_id": "nope", "code": "1"}), 404, "no_template"
    )
    assert_envelope(http.post("/v1/sessions", json={}), 400, "template_id_required")
    assert_envelope(http.post("/v1/sessions", json={"template_id": "nope"}), 404, "no_template")


def test_fork_semantics(http: httpx.Client, template: str) -> None:
    parent = create(http, template)
    http.post(
        f"/v1/sessions/{parent}/exec",
        json={"files": [{"path": "state.txt", "content": "parent"}], "command": "true"},
    )
    resp = http.post(f"/v1/sessions/{parent}/fork", json={"count": 3})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["parent"] == parent and len(body["children"]) == 3
    kids = [c["session_id"] for c in body["children"]]
    for child in body["children"]:
        assert child["id"] == child["session_id"] and child["template_id"] == template
        assert set(child) == {"id", "session_id", "template_id", "fork_time_ms", "create_time_ms"}
    assert len(set(kids) | {parent}) == 4
    # Children see the parent's files; writes stay private to the writer.
    for i, kid in enumerate(kids):
        out = http.post(
            f"/v1/sessions/{kid}/exec", json={"command": f"cat state.txt; printf {i} > state.txt"}
        ).json()
        assert out["stdout"] == "parent"
    assert (
        http.post(f"/v1/sessions/{parent}/exec", json={"command": "cat state.txt"}).json()["stdout"]
        == "parent"
    )
    assert (
        http.post(f"/v1/sessions/{kids[1]}/exec", json={"command": "cat state.txt"}).json()[
            "stdout"
        ]
        == "1"
    )
    assert_envelope(
        http.post("/v1/sessions/ses_nope/fork", json={"count": 1}), 404, "no_such_session"
    )
    assert_envelope(http.post(f"/v1/sessions/{parent}/fork", json={"count": 0}), 400, "bad_request")
    for sid in [parent, *kids]:
        assert http.delete(f"/v1/sessions/{sid}").status_code == 200


@pytest.mark.anyio
async def test_fork_of_busy_session_is_409(shared_node: ThreadedNode, template: str) -> None:
    import anyio

    async with shared_node.async_client() as client:
        sid = (await client.post("/v1/sessions", json={"template_id": template})).json()[
            "session_id"
        ]
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    client.post, f"/v1/sessions/{sid}/exec", json={"command": "sleep 1.5"}
                )
            )
            await anyio.sleep(0.5)
            resp = await client.post(f"/v1/sessions/{sid}/fork", json={"count": 1})
            assert_envelope(resp, 409, "session_busy")
        await client.delete(f"/v1/sessions/{sid}")


def test_egress(http: httpx.Client, template: str) -> None:
    ok = http.post("/v1/sessions", json={"template_id": template, "egress": {"mode": "none"}})
    assert ok.status_code == 201
    http.delete(f"/v1/sessions/{ok.json()['session_id']}")
    bad = http.post("/v1/sessions", json={"template_id": template, "egress": {"allow": ["x.org"]}})
    assert_envelope(bad, 400, "bad_request")
    assert "vsock-only" in bad.json()["error"]


def test_large_output_is_capped_text(http: httpx.Client, template: str) -> None:
    resp = http.post(
        "/v1/exec",
        json={"template_id": template, "code": "import sys; sys.stdout.buffer.write(b'\\xff' * 3)"},
    ).json()
    assert resp["stdout"] == "\ufffd" * 3  # undecodable bytes are replaced, never an error
