"""Turning a task's grading description into a :mod:`collimate_rl.grading` reward spec.

==========================  =================================================================
task tests                  reward spec
==========================  =================================================================
:class:`UnitTests`          ``UnitTestReward([{"input": args, "expected": ...}], entry=...)``
:class:`AssertTests`        ``UnitTestReward(<test script>, entry=...)``: each assert a test;
                            with a ``check_fn`` (HumanEval) the checker is one pass/fail test
                            (``all_or_nothing=True`` unless given). Both take the task's
                            ``starter_code`` (HumanEval's prompt)
:class:`FunctionCallTests`  ``FunctionCallReward(fn_name, [{"input": args, "output": json}])``
:class:`IOTests`            ``IOReward([{"input": stdin, "output": stdout}])`` (the task's
                            ``language`` if it has one, else the template decides)
:class:`ProgramTests`       ``MultiPLEReward(prompt, tests, language, stop_tokens=...)``
:class:`PropertyTests`      ``PropertyReward`` when each input is one argument; otherwise a
                            ``CustomReward`` script that splats the argument tuple
==========================  =================================================================

Property inputs are drawn from the exec's seed (the grading layer's common random numbers),
not from ``PropertyTests.seed``.

>>> from collimate_envs.tasks._model import Task, UnitTests
>>> task = Task("t", "p", UnitTests(cases=(((1, 2), 3),)), entry_point="add")
>>> spec = reward_spec_for(task, all_or_nothing=True)
>>> type(spec).__name__, spec.entry, spec.tests, spec.all_or_nothing
('UnitTestReward', 'add', [{'input': [1, 2], 'expected': 3}], True)
"""

from __future__ import annotations

import ast
import json
from typing import TYPE_CHECKING, Any, Protocol

from collimate_envs.tasks._tests import (
    AssertTests,
    FunctionCallTests,
    IOTests,
    ProgramTests,
    PropertyTests,
    TestSpec,
    UnitTests,
)

if TYPE_CHECKING:
    from collimate_rl.grading import RewardSpec

__all__ = ["GradedTask", "reward_spec_for", "single_argument_generator"]


class GradedTask(Protocol):
    """What a spec is built from: the parts of a :class:`~collimate_envs.tasks.Task` read here.

    A protocol, so this module needs only the test descriptions and the task
    model can call it (``Task.to_reward_spec``) without a circle.
    """

    @property
    def tests(self) -> TestSpec: ...

    @property
    def entry_point(self) -> str | None: ...

    @property
    def starter_code(self) -> str | None: ...

    @property
    def task_id(self) -> str: ...

    @property
    def prompt(self) -> str: ...

    @property
    def language(self) -> str | None: ...


# The body of the CustomReward script for multi-argument property tests; the header defines
# REFERENCE, GENERATOR, ENTRY and K. Runs in the trusted harness, never in the candidate.
_PROPERTY_GRADER = """
import copy


def _norm(value):
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def grade(api):
    draw = eval("lambda: (" + GENERATOR + ")", {"random": api.random})
    inputs = [draw() for _ in range(K)]  # all drawn first: common random numbers
    namespace = {"__name__": "reference"}
    exec(compile(REFERENCE, "<reference>", "exec"), namespace)
    reference = namespace[ENTRY]
    passed = 0
    for index, args in enumerate(inputs):
        want = _norm(reference(*copy.deepcopy(args)))
        try:
            got = _norm(api.call(ENTRY, *copy.deepcopy(args)))
        except Exception as exc:
            api.record(f"trial {index}", False, f"{type(exc).__name__}: {exc}"[:300])
            continue
        ok = got == want
        passed += ok
        detail = "" if ok else f"args {args!r:.120} expected {want!r:.80} got {got!r:.80}"
        api.record(f"trial {index}", ok, detail)
    return passed, K
"""


def single_argument_generator(generator: str) -> str | None:
    """The element expression when ``generator`` is a literal one-tuple ``(expr,)``.

    >>> single_argument_generator("([random.randint(0, 9) for _ in range(3)],)")
    '[random.randint(0, 9) for _ in range(3)]'
    >>> single_argument_generator("(random.randint(0, 9), 4)") is None
    True
    """
    try:
        tree = ast.parse(generator.strip(), mode="eval")
    except SyntaxError:
        return None
    body = tree.body
    if isinstance(body, ast.Tuple) and len(body.elts) == 1:
        return ast.get_source_segment(generator.strip(), body.elts[0])
    return None


def _property_spec(task: GradedTask, spec: PropertyTests, options: dict[str, Any]) -> RewardSpec:
    from collimate_rl.grading import CustomReward, PropertyReward

    entry = task.entry_point or ""
    single = single_argument_generator(spec.generator)
    if single is not None:
        return PropertyReward(spec.reference, single, k=spec.k, entry=entry, **options)
    header = (
        f"REFERENCE = {spec.reference!r}\nGENERATOR = {spec.generator!r}\n"
        f"ENTRY = {entry!r}\nK = {spec.k!r}\n"
    )
    return CustomReward(header + _PROPERTY_GRADER, entry=entry, **options)


def reward_spec_for(task: GradedTask, **options: Any) -> RewardSpec:
    """The reward spec grading ``task`` (see the module table).

    Args:
        task: the task.
        **options: passed to the spec (``all_or_nothing``, ``per_test_timeout``, ...).

    Raises:
        ModuleNotFoundError: :mod:`collimate_rl.grading` is not importable.
    """
    try:
        from collimate_rl.grading import FunctionCallReward, IOReward, UnitTestReward
    except ImportError as exc:  # pragma: no cover - the grading layer ships with the package
        raise ModuleNotFoundError(
            "Task.to_reward_spec needs collimate_rl.grading (part of collimate-rl)"
        ) from exc
    spec = task.tests
    entry = task.entry_point or ""
    # Starter code (HumanEval's prompt) is graded by the spec's one rule: an answer that
    # defines the entry point keeps the starter's helpers, any other answer continues it.
    starter = task.starter_code or ""
    if isinstance(spec, UnitTests):
        records = [{"input": list(args), "expected": expected} for args, expected in spec.cases]
        return UnitTestReward(records, entry=entry, starter_code=starter, **options)
    if isinstance(spec, AssertTests):
        # A checker function (HumanEval's check) is one test: pass/fail, as its benchmark says.
        options.setdefault("all_or_nothing", spec.check_fn is not None)
        return UnitTestReward(spec.script(entry), entry=entry, starter_code=starter, **options)
    if isinstance(spec, FunctionCallTests):
        cases = []
        for args, expected in spec.cases:
            if spec.accept_wrapped and isinstance(expected, list) and len(expected) == 1:
                expected = expected[0]  # APPS wraps call outputs; grade on the value
            # JSON text: the spec decodes string outputs as JSON.
            cases.append({"input": list(args), "output": json.dumps(expected)})
        return FunctionCallReward(spec.fn_name, cases, **options)
    if isinstance(spec, IOTests):
        io_options: dict[str, Any] = {"language": task.language}
        if spec.memory_limit_bytes is not None:
            io_options["memory_limit_bytes"] = spec.memory_limit_bytes
        cases = [{"input": i, "output": o} for i, o in spec.cases]
        return IOReward(cases, **{**io_options, **options})
    if isinstance(spec, ProgramTests):
        from collimate_rl.grading import MultiPLEReward

        assert task.language is not None  # Task checks it
        return MultiPLEReward(
            task.prompt,
            spec.tests,
            task.language,
            stop_tokens=spec.stop_tokens,
            name=task.task_id,
            **options,
        )
    return _property_spec(task, spec, options)
