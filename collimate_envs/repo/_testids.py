"""Test ids: pytest node ids and unittest ids, as task rows name them and runners report them.

Rows name tests the way their harness does: pytest node ids
(``tests/test_calc.py::TestAdd::test_neg[1-2]``), or unittest ids, either Django's and
SWE-bench's ``test_neg (tests.test_calc.TestAdd)`` or the dotted
``tests.test_calc.TestAdd.test_neg``. :func:`canonical` turns each into one key, so a
row's ids and a report's outcomes meet whichever form either side used.

>>> canonical("tests/test_calc.py::TestAdd::test_neg[1-2]")
'tests/test_calc.py::TestAdd::test_neg[1-2]'
>>> canonical("test_neg (tests.test_calc.TestAdd)")
'tests/test_calc.py::TestAdd::test_neg'
>>> canonical("tests.test_calc.TestAdd.test_neg")
'tests/test_calc.py::TestAdd::test_neg'
>>> test_list('["a.py::t1", "a.py::t2"]')
('a.py::t1', 'a.py::t2')
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "OUTCOMES",
    "canonical",
    "outcomes_from_log",
    "pytest_targets",
    "test_list",
]

#: The outcomes a test can have in ``info``: ``passed``, ``failed``, ``error`` (its setup or
#: collection failed), ``skipped``, ``missing`` (the runner never reported it).
OUTCOMES = ("passed", "failed", "error", "skipped", "missing")

_UNITTEST_PAREN = re.compile(r"^(?P<name>[\w]+) \((?P<where>[\w.]+)\)(?:\s*$|\s*\n)")
_PYTEST_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S.*?)(?: - .*)?$")
_UNITTEST_LINE = re.compile(
    r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?:\n.*)?\s*\.\.\.\s*(?P<status>ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$"
)


def test_list(value: Any) -> tuple[str, ...]:
    """A row's ``FAIL_TO_PASS`` / ``PASS_TO_PASS``: a list, or a JSON string of one.

    Raises:
        ValueError: anything else (a bare string that is not a JSON list, non-text items).
    """
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"a test list must be a list or a JSON list, got {value!r:.80}"
            ) from exc
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"a test list must hold non-empty strings, got {value!r:.80}")
    return tuple(value)


def _dotted_to_node(dotted: str, name: str | None = None) -> str:
    parts = dotted.split(".")
    if name is None:
        name, parts = parts[-1], parts[:-1]
    # The class is the last CamelCase part; what precedes it is the module path.
    classes = [i for i, part in enumerate(parts) if part[:1].isupper()]
    if classes:
        cut = classes[0]
        module, owners = parts[:cut], parts[cut:]
    else:
        module, owners = parts, []
    return "::".join(["/".join(module) + ".py", *owners, name])


def canonical(test_id: str) -> str:
    """One key per test, whatever form names it (see the module docstring)."""
    text = test_id.strip()
    if "::" in text:
        return text
    match = _UNITTEST_PAREN.match(text)
    if match:
        return _dotted_to_node(match.group("where"), match.group("name"))
    if re.fullmatch(r"[\w.]+", text) and "." in text:
        return _dotted_to_node(text)
    return text


def pytest_targets(test_ids: Iterable[str]) -> list[str]:
    """What to hand pytest on its command line for these ids (node ids, deduplicated)."""
    seen: dict[str, None] = {}
    for test_id in test_ids:
        seen.setdefault(canonical(test_id), None)
    return list(seen)


def outcomes_from_log(log: str) -> dict[str, str]:
    """Per-test outcomes read from a runner's output: pytest ``-rA`` lines or unittest ``-v`` lines.

    Used when a custom test command wrote no report of ours.

    >>> outcomes_from_log("PASSED t.py::a\\nFAILED t.py::b - assert 1 == 2\\n")
    {'t.py::a': 'passed', 't.py::b': 'failed'}
    >>> outcomes_from_log("test_x (pkg.tests.TestA) ... ok\\n")
    {'pkg/tests.py::TestA::test_x': 'passed'}
    """
    found: dict[str, str] = {}
    pytest_status = {
        "PASSED": "passed",
        "XFAIL": "passed",
        "FAILED": "failed",
        "XPASS": "failed",
        "ERROR": "error",
        "SKIPPED": "skipped",
    }
    for line in log.splitlines():
        line = line.rstrip()
        match = _PYTEST_LINE.match(line)
        if match:
            found[canonical(match.group(2))] = pytest_status[match.group(1)]
            continue
        match = _UNITTEST_LINE.match(line)
        if match:
            status = match.group("status")
            outcome = (
                "passed"
                if status in ("ok", "expected failure")
                else "skipped"
                if status.startswith("skipped")
                else "error"
                if status == "ERROR"
                else "failed"
            )
            found[_dotted_to_node(match.group("where"), match.group("name"))] = outcome
    return found


def outcome_of(test_id: str, outcomes: Mapping[str, str]) -> str:
    """The outcome of a row's test id in a report keyed by :func:`canonical` ids."""
    return outcomes.get(canonical(test_id), "missing")
