"""The restricted codec: round-trips plain data, refuses everything else."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collimate_rl.grading import _codec

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.complex_numbers(allow_nan=False)
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=8
)
values = st.recursive(
    scalars | hashables,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that also requires identical types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@given(values)
def test_round_trip_keeps_values_and_types(value: Any) -> None:
    assert _same(_codec.loads(_codec.dumps(value)), value)


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_non_finite_floats(value: float) -> None:
    assert _codec.loads(_codec.dumps([value])) == [value]
    assert math.isnan(_codec.loads(_codec.dumps(math.nan)))


class _Liar:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class _LyingInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [_Liar(), _LyingInt(3), [1, _Liar()], {"k": _LyingInt(1)}, type("L", (list,), {})(), print],
)
def test_refuses_anything_but_plain_builtins(value: Any) -> None:
    with pytest.raises(_codec.Unserializable):
        _codec.encode(value)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',  # an untagged object
        '{"q": [1]}',  # an unknown tag
        '{"t": 1}',  # a tag without a list
        '{"c": [1, 2]}',  # complex parts must be floats
        '{"d": [[1]]}',  # a pair of one
        '{"s": [[1]]}',  # an unhashable set item
        '{"b": "***"}',  # bad base64
        '{"f": "1.5"}',  # not a non-finite float
        '{"i": "xyz"}',  # a big int must be hex
        '{"i": 12}',
        "[" * 100000,  # nested past the stack
        "not json",
    ],
)
def test_decoder_rejects_malformed_encodings(text: str) -> None:
    with pytest.raises(_codec.CodecError):
        _codec.loads(text)


def test_deep_values_are_refused_both_ways() -> None:
    deep: Any = []
    for _ in range(_codec.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(_codec.Unserializable):
        _codec.encode(deep)
    with pytest.raises(_codec.CodecError):
        _codec.loads("[" * (_codec.MAX_DEPTH + 5) + "]" * (_codec.MAX_DEPTH + 5))


def test_big_ints_cross_beyond_the_decimal_digit_limit() -> None:
    for value in (10**5000, -(10**5000) - 7, 2**4000, 2**4001):
        assert _codec.loads(_codec.dumps([value])) == [value]
    assert _codec.dumps(2**4000) == str(2**4000) or _codec.dumps(2**4000).startswith('{"i"')
