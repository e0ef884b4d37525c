"""Common random numbers: one seed, one set of property inputs (calls, sessions, forks)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collimate_rl.grading import GradeResult, PropertyReward, grade

from ._fake import SubprocessClient
from .conftest import TEMPLATE

SPEC = PropertyReward(
    "return sorted(x)",
    "[random.randint(-1000, 1000) for _ in range(random.randint(1, 6))]",
    k=6,
)
CANDIDATE = "def solve(x):\n    return sorted(x)\n"
seeds = st.binary(min_size=32, max_size=32).map(bytes.hex)


def _inputs(result: GradeResult) -> list[str | None]:
    assert result.total == 6 and result.reward == 1.0, result
    return [t.input for t in result.tests]


def test_one_seed_same_inputs_across_calls_sessions_and_forks(client: Any) -> None:
    seed = "5e" * 32
    first = _inputs(grade(client, TEMPLATE, CANDIDATE, SPEC, seed=seed, extract=False))
    again = _inputs(grade(client, TEMPLATE, CANDIDATE, SPEC, seed=seed, extract=False))
    assert first == again

    parent = client.create_session(TEMPLATE)["session_id"]
    children: list[str] = []
    try:
        in_session = grade(
            client, TEMPLATE, CANDIDATE, SPEC, seed=seed, session_id=parent, extract=False
        )
        assert _inputs(in_session) == first
        children = [c["session_id"] for c in client.fork_session(parent, 2)["children"]]
        for child in children:
            forked = grade(
                client, TEMPLATE, CANDIDATE, SPEC, seed=seed, session_id=child, extract=False
            )
            assert _inputs(forked) == first
            assert forked.seed == seed
    finally:
        for session in [parent, *children]:
            client.delete_session(session)


def test_a_wrong_candidate_sees_the_same_inputs(client: Any) -> None:
    # The inputs are drawn before anything is asked of the candidate.
    seed = "07" * 32
    right = grade(client, TEMPLATE, CANDIDATE, SPEC, seed=seed, extract=False)
    wrong = grade(
        client,
        TEMPLATE,
        "import random\ndef solve(x):\n    random.random()\n    return x\n",
        SPEC,
        seed=seed,
        extract=False,
    )
    assert [t.input for t in wrong.tests] == [t.input for t in right.tests]


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(a=seeds, b=seeds)
def test_different_seeds_draw_different_inputs(client: Any, a: str, b: str) -> None:
    inputs_a = _inputs(grade(client, TEMPLATE, CANDIDATE, SPEC, seed=a, extract=False))
    inputs_b = _inputs(grade(client, TEMPLATE, CANDIDATE, SPEC, seed=b, extract=False))
    assert (inputs_a == inputs_b) == (a.lower() == b.lower())


@settings(max_examples=5, deadline=None)
@given(seed=seeds)
def test_the_draw_is_a_function_of_the_seed_alone(seed: str) -> None:
    # Same seed through the node and through a plain subprocess: same inputs.
    fake = SubprocessClient()
    one = _inputs(grade(fake, TEMPLATE, CANDIDATE, SPEC, seed=seed, extract=False))
    two = _inputs(grade(fake, TEMPLATE, CANDIDATE, SPEC, seed=seed.upper(), extract=False))
    assert one == two
