"""Reward specs: how a candidate program is graded inside the sandbox.

A spec turns a candidate's source into one exec: ``code`` is the generic
harness (no secrets in it) and ``files`` carries one JSON payload with the
tests. The harness prints a single result frame,
``COLLIMATE_RESULT <nonce> <json>``, which :meth:`RewardSpec.read_frame`
checks against the nonce the caller chose. One module per spec kind; the
base class and the frame have their own (``_base``, ``_frame``).

>>> spec = UnitTestReward([{"input": [2, 3], "expected": 5}], entry="add")
>>> program = spec.build("def add(a, b):\\n    return a + b\\n", nonce="ab" * 16)
>>> program.files[0]["path"].startswith("/tmp/colgrade_")
True
>>> spec.parse("noise\\n0.5\\n")  # the 0.8.0 bare-float contract still parses
0.5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collimate_rl.grading import _codec
from collimate_rl.grading.specs._base import DEFAULT_PER_TEST_TIMEOUT, RewardSpec, _usage
from collimate_rl.grading.specs._custom import CustomReward
from collimate_rl.grading.specs._frame import RESULT_PREFIX, Frame, Program
from collimate_rl.grading.specs._function_call import LCB_PRELUDE, FunctionCallReward
from collimate_rl.grading.specs._io import IOReward
from collimate_rl.grading.specs._property import PropertyReward
from collimate_rl.grading.specs._unit_tests import UnitTestReward

__all__ = [
    "DEFAULT_PER_TEST_TIMEOUT",
    "LCB_PRELUDE",
    "RESULT_PREFIX",
    "CustomReward",
    "Frame",
    "FunctionCallReward",
    "IOReward",
    "Program",
    "PropertyReward",
    "RewardSpec",
    "UnitTestReward",
    "spec_from_dict",
]

_SPEC_TYPES: dict[str, type[RewardSpec]] = {
    cls.__name__: cls
    for cls in (UnitTestReward, PropertyReward, IOReward, FunctionCallReward, CustomReward)
}


def spec_from_dict(data: Mapping[str, Any]) -> RewardSpec:
    """Rebuild a spec from :meth:`RewardSpec.to_dict`.

    >>> spec = IOReward([{"input": "", "output": "hi"}], float_tolerance=1e-6)
    >>> spec_from_dict(spec.to_dict()) == spec
    True
    """
    try:
        cls = _SPEC_TYPES[data["type"]]
        fields = _codec.decode(data["fields"])
    except (KeyError, TypeError, _codec.CodecError) as exc:
        raise _usage(f"not a reward spec description: {exc}") from None
    return cls(**fields)
