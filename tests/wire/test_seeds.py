"""``collimate_rl.seeds``: validation and group modes."""

from __future__ import annotations

import hashlib
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.errors import CollimateUsageError
from collimate_rl.seeds import (
    DET_SEED,
    MODES,
    fresh_seed,
    group_seeds,
    is_valid_seed,
    seed_from_key,
)

HEX = st.text(alphabet=string.hexdigits, min_size=64, max_size=64)


@given(HEX)
def test_any_64_hex_string_is_valid(seed: str) -> None:
    assert is_valid_seed(seed)


@given(st.text(max_size=70))
def test_validity_is_exactly_64_hex(value: str) -> None:
    expected = len(value) == 64 and all(c in string.hexdigits for c in value)
    assert is_valid_seed(value) is expected


@given(
    st.one_of(st.none(), st.integers(), st.binary(min_size=64, max_size=64), st.lists(st.just("a")))
)
def test_non_strings_are_invalid(value: object) -> None:
    assert not is_valid_seed(value)


@given(HEX, st.sampled_from(["\n", " ", "0"]))
def test_padding_is_invalid(seed: str, pad: str) -> None:
    assert not is_valid_seed(seed + pad) and not is_valid_seed(pad + seed)


def test_fresh_seed() -> None:
    a, b = fresh_seed(), fresh_seed()
    assert is_valid_seed(a) and a == a.lower() and a != b


@given(st.text(), st.text())
def test_seed_from_key(key: str, salt: str) -> None:
    seed = seed_from_key(key, salt)
    assert seed == hashlib.sha256((salt + "\x00" + key).encode()).hexdigest()
    assert is_valid_seed(seed) and seed == seed_from_key(key, salt=salt)


@given(st.integers(0, 50), st.one_of(st.none(), HEX))
def test_group_modes(n: int, base: str | None) -> None:
    assert group_seeds(n, "vanilla", base) == [None] * n
    det = group_seeds(n, "deterministic", base)
    assert det == [base or DET_SEED] * n
    crn = group_seeds(n, "crn", base)
    assert len(crn) == n and len(set(crn)) <= 1
    if base is not None:
        assert crn == [base] * n
    assert all(is_valid_seed(s) for s in crn)


def test_group_errors() -> None:
    assert MODES == ("vanilla", "crn", "deterministic")
    assert group_seeds(2) != [None, None]  # crn is the default
    with pytest.raises(CollimateUsageError, match="group size"):
        group_seeds(-1)
    with pytest.raises(ValueError, match="unknown seed mode"):
        group_seeds(1, "random")
    with pytest.raises(ValueError, match="base_seed must be 64 hex chars"):
        group_seeds(1, "crn", base_seed="xyz")
    assert group_seeds(1, "vanilla", base_seed="xyz") == [None]
