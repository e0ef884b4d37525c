"""The expected outputs stay out of a candidate's reach, in any language.

``_hunter.c`` reads every file it can, every other process's cmdline, environment, open
files and readable memory, looking for the expected outputs (random ``SECRET-<hex>``
tokens), and prints what it finds. Graded for real it must score below 1.0; the control
plants a token where a leak would be and the same hunter must find it there.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from collimate_rl import Sandbox
from collimate_rl.grading import IOReward, grade

from ._programs import fenced

pytestmark = pytest.mark.bwrap

HUNTER = fenced((Path(__file__).parent / "_hunter.c").read_text(encoding="utf-8"), "c")


def _token() -> str:
    return f"SECRET-{secrets.token_hex(8)}"


def test_the_hunter_cannot_find_the_expected_outputs(local_client: Any, need: Any) -> None:
    need("c")
    cases = [{"input": "which?\n", "output": _token() + "\n"} for _ in range(2)]
    spec = IOReward(cases, per_test_timeout=60.0)
    result = grade(local_client, "c", HUNTER, spec, timeout_seconds=150)
    assert not result.infra_error and result.total == 2
    assert result.reward < 1.0 and result.passed == 0, result.tests
    assert all(t.status == "fail" for t in result.tests), result.tests
    assert all("nothing found" in t.detail for t in result.tests), result.tests


def test_control_the_hunter_finds_a_planted_token(local_client: Any, need: Any) -> None:
    need("c")
    token = _token()
    spec = IOReward([{"input": "which?\n", "output": token + "\n"}], per_test_timeout=60.0)
    with Sandbox("c", client=local_client) as box:
        box.upload_bytes("notes/leak.txt", f"left behind: {token}\n".encode())
        result = grade(
            local_client, "c", HUNTER, spec, session_id=box.session_id, timeout_seconds=150
        )
    assert result.reward == 1.0, (result.tests, result.output_tail[-300:])
