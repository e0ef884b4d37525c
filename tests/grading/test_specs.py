"""Spec construction, serialisation, the program they build and how verdicts are read."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading import (
    CustomReward,
    FunctionCallReward,
    IOReward,
    PropertyReward,
    RewardSpec,
    UnitTestReward,
    spec_from_dict,
)
from collimate_rl.grading._shipping import harness_source as _harness_source
from collimate_rl.grading.specs import RESULT_PREFIX

ALL_SPECS: list[RewardSpec] = [
    UnitTestReward([{"input": [(1, 2)], "expected": (1, 2)}], entry="f", all_or_nothing=True),
    UnitTestReward(["assert f(1) == 1", "assert f(2) == 2"], entry="f", setup="import math"),
    UnitTestReward("def check(c):\n    assert c(1)\ncheck(f)\n", entry="f"),
    PropertyReward("return x", "random.random()", k=3, float_tolerance=1e-9),
    IOReward([{"input": "1\n", "output": "1\n"}], strip_whitespace=False, float_tolerance=1e-6),
    FunctionCallReward("f", [{"input": "[1, 2]\n3", "output": "[1, 2, 3]"}]),
    CustomReward("def grade(api):\n    return 1.0"),
]


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: type(s).__name__)
def test_specs_round_trip_and_build(spec: RewardSpec) -> None:
    again = spec_from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.digest() == spec.digest()
    program = spec.build("def f(x):\n    return x\n", nonce="a" * 32, timeout_seconds=10)
    compile(program.code, "<program>", "exec")
    assert program.code.rstrip().endswith(f"main({program.files[0]['path']!r})")
    payload = json.loads(program.files[0]["content"])
    assert payload["nonce"] == "a" * 32 and payload["kind"] == spec.kind
    assert 0 < payload["budget_seconds"] < 10
    # The harness code carries no secrets: only the data file does.
    assert "a" * 32 not in program.code


def test_two_builds_differ_only_in_nonce_and_path() -> None:
    spec = ALL_SPECS[0]
    one, two = spec.build("x = 1"), spec.build("x = 1")
    assert one.files[0]["path"] != two.files[0]["path"]
    p1, p2 = (json.loads(p.files[0]["content"]) for p in (one, two))
    assert p1.pop("nonce") != p2.pop("nonce") and p1 == p2


def test_shipped_harness_is_stdlib_only_and_has_no_package_imports() -> None:
    source = _harness_source()
    assert "from collimate_rl" not in source and "import collimate_rl" not in source
    assert "from ._" not in source
    assert source.count("from __future__") == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: UnitTestReward(42), "list of"),
        (lambda: UnitTestReward([{"input": 1}]), "'input' and 'expected'"),
        (lambda: UnitTestReward(["assert f()", {"input": 1, "expected": 1}]), "mix"),
        (lambda: UnitTestReward([], per_test_timeout=0), "positive"),
        (lambda: PropertyReward("return x", "random.random(", k=1), "expression"),
        (lambda: PropertyReward("return x", "1", k=-1), "non-negative"),
        (lambda: IOReward("1 2"), "list"),
        (lambda: IOReward([{"stdin": "x"}]), "output"),
        (lambda: IOReward([{"input": 1, "output": "1"}]), "text"),
        (lambda: FunctionCallReward("not a name", []), "identifier"),
        (lambda: FunctionCallReward("f", [{"input": "{oops", "output": "1"}]), "JSON"),
        (lambda: CustomReward("def grade(api) return 1"), "compile"),
    ],
)
def test_bad_specs_say_what_is_expected(make: Any, message: str) -> None:
    with pytest.raises(CollimateUsageError, match=message):
        make()


@pytest.mark.parametrize(
    ("stdout", "reward"),
    [
        ("0.25\n", 0.25),
        ("noise\n  2e-1  \n\n", 0.2),
        ("1.7", 1.0),
        ("-3", 0.0),
        ("inf", 1.0),
        ("-inf", 0.0),
        ("nan", 0.0),  # 0.8.0 gave 1.0 here; a NaN is no evidence of success
        ("0.5\nTraceback: boom", 0.0),
        ("", 0.0),
    ],
)
def test_parse_keeps_the_bare_float_contract(stdout: str, reward: float) -> None:
    assert ALL_SPECS[1].parse(stdout) == reward


def test_parse_prefers_the_frame_and_reward_of_applies_the_spec() -> None:
    frame = {"v": 1, "passed": 1, "total": 2, "tests": []}
    text = f"0.9\n{RESULT_PREFIX} {'b' * 32} {json.dumps(frame)}\n"
    assert ALL_SPECS[1].parse(text) == 0.5
    assert ALL_SPECS[0].parse(text) == 0.0  # all-or-nothing
    read = RewardSpec.read_frame(text, "b" * 32)
    assert read is not None and (read.passed, read.total) == (1, 2)
    assert RewardSpec.read_frame(text, "c" * 32) is None


@pytest.mark.parametrize(
    "body",
    [
        '{"passed": 3, "total": 2}',
        '{"passed": -1, "total": 2}',
        '{"passed": true, "total": 2}',
        '{"passed": 1.0, "total": 2}',
        "[1, 2]",
        "{not json",
    ],
)
def test_impossible_frames_are_rejected(body: str) -> None:
    assert RewardSpec.read_frame(f"{RESULT_PREFIX} {'d' * 32} {body}", "d" * 32) is None


def test_custom_rewards_are_clamped() -> None:
    for raw, reward in ((7, 1.0), (-2, 0.0), (0.25, 0.25)):
        frame = {"v": 1, "passed": 0, "total": 1, "tests": [], "reward": raw}
        read = RewardSpec.read_frame(f"{RESULT_PREFIX} {'e' * 32} {json.dumps(frame)}", "e" * 32)
        assert read is not None and math.isclose(ALL_SPECS[-1].reward_of(read), reward)
