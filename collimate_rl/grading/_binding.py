"""Which language a grade is in, and how its code comes out of the completion.

A spec that can grade other languages (``IOReward``, ``MultiPLEReward``) carries a
``language``; left ``None``, the template id decides (the local node's ``"cpp"`` template
grades C++, ``"python3"`` Python). A spec that calls Python functions (``UnitTestReward``,
``FunctionCallReward``, ``PropertyReward``, ``CustomReward``) refuses a template that names
another language, rather than grading Python candidates on a C++ template by surprise.

>>> from collimate_rl.grading import IOReward, UnitTestReward
>>> bind_language(IOReward([], language=None), "rust").language
'rust'
>>> bind_language(UnitTestReward("assert f() == 1", entry="f"), "java")
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: UnitTestReward calls Python functions, but template 'java' is Java: ...
"""

from __future__ import annotations

import dataclasses

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading.extract import extract_code
from collimate_rl.grading.languages import LANGUAGES, language_of_template
from collimate_rl.grading.specs import RewardSpec

__all__ = ["bind_language", "extract_source"]


def _takes_language(spec: RewardSpec) -> bool:
    return any(f.name == "language" for f in dataclasses.fields(spec))  # type: ignore[arg-type]


def bind_language(spec: RewardSpec, template: str) -> RewardSpec:
    """``spec`` with its language settled for ``template`` (see the module docstring)."""
    implied = language_of_template(template)
    other = implied is not None and implied != "python"
    if _takes_language(spec):
        if getattr(spec, "language", None) is None and other:
            return dataclasses.replace(spec, language=implied)  # type: ignore[type-var]
        return spec
    if other:
        assert implied is not None
        raise CollimateUsageError(
            f"{type(spec).__name__} calls Python functions, but template {template!r} is "
            f"{LANGUAGES[implied].title}: grade other languages with IOReward (stdin/stdout "
            "cases) or MultiPLEReward, or use a Python template"
        )
    return spec


def extract_source(spec: RewardSpec, completion: str) -> str:
    """The code to grade in ``completion``: the spec's own rule, else fenced blocks of its language."""
    custom = getattr(spec, "extract_source", None)
    if callable(custom):
        return str(custom(completion))
    wanted = getattr(spec, "language", None) or "python"
    return extract_code(completion, entry=spec.extract_entry, language=wanted)
