"""Languages beyond Python: how the grading harness builds and runs a candidate program.

The table itself (:class:`Language`, :data:`LANGUAGES`: fence tags, source file, compile and
run command lines with plain tool names found on the sandbox's ``PATH``) lives in
:mod:`collimate_rl._languages`, which the node shares; this module re-exports it and turns it
into harness payloads. The trusted harness writes the source into a fresh build folder,
compiles it once in a process that never saw the tests, and runs every case as a new process
with the case's input on stdin (see :mod:`collimate_rl.grading._build`).

Python needs none of this: a Python candidate runs in the node's warm interpreter, as it
always has. ``"python"`` is in the table so every name resolves.

>>> language("c++").name, language("rs").name, language("golang").title
('cpp', 'rust', 'Go')
>>> LANGUAGES["java"].source_file("public final class Solution { }")
'Solution.java'
>>> language_of_template("cpp"), language_of_template("py"), language_of_template("mine")
('cpp', 'python', None)
"""

from __future__ import annotations

import secrets
from typing import Any

from collimate_rl._languages import (
    DEFAULT_COMPILE_MEMORY_BYTES,
    DEFAULT_COMPILE_OUTPUT_BYTES,
    DEFAULT_COMPILE_TIMEOUT,
    DEFAULT_MEMORY_BYTES,
    FENCE_TAGS,
    LANGUAGES,
    Language,
    language,
    language_of_template,
)
from collimate_rl.errors import CollimateUsageError

__all__ = [
    "DEFAULT_COMPILE_MEMORY_BYTES",
    "DEFAULT_COMPILE_OUTPUT_BYTES",
    "DEFAULT_COMPILE_TIMEOUT",
    "DEFAULT_MEMORY_BYTES",
    "FENCE_TAGS",
    "LANGUAGES",
    "Language",
    "check_limits",
    "language",
    "language_of_template",
    "limits_payload",
    "program_payload",
]


def program_payload(
    lang: Language,
    source: str,
    *,
    memory_bytes: int | None,
    compile_timeout: float,
    compile_memory_bytes: int,
    compile_output_bytes: int,
    assertions: bool = False,
) -> dict[str, Any]:
    """The harness payload's ``program``: where the source goes and how it is built and run.

    >>> p = program_payload(LANGUAGES["c"], "int main(void){}", memory_bytes=None,
    ...     compile_timeout=10.0, compile_memory_bytes=1 << 30, compile_output_bytes=4096)
    >>> p["files"], p["compile"][:2], p["run"], p["run_limits"]["memory"] == DEFAULT_MEMORY_BYTES
    ({'main.c': 'int main(void){}'}, ['gcc', '-std=gnu11'], ['./main'], True)
    """
    memory = DEFAULT_MEMORY_BYTES if memory_bytes is None else int(memory_bytes)
    compile_argv, run_argv = lang.commands(
        source,
        memory_bytes=memory,
        compile_memory_bytes=compile_memory_bytes,
        assertions=assertions,
    )
    stack = min(lang.stack_bytes, memory) if lang.stack_bytes is not None else None
    return {
        "language": lang.name,
        # the harness creates it; relative names keep it out of compiler messages
        "dir": f"/tmp/colbuild_{secrets.token_hex(8)}",
        "files": {lang.source_file(source): source},
        "compile": compile_argv or None,
        "run": run_argv,
        "env": dict(lang.env),
        "compile_limits": {
            "timeout": float(compile_timeout),
            "memory": int(compile_memory_bytes),
            "output": int(compile_output_bytes),
        },
        "run_limits": {"memory": memory + lang.memory_slack_bytes, "stack": stack},
    }


_LIMIT_FIELDS = (
    "memory_limit_bytes",
    "output_limit_bytes",
    "compile_timeout",
    "compile_memory_bytes",
    "compile_output_bytes",
)


def check_limits(spec: Any) -> None:
    """Validate a spec's ``language`` and limits; store the language's canonical name.

    For the ``__post_init__`` of frozen spec dataclasses that have these fields.
    """
    if spec.language is not None:
        object.__setattr__(spec, "language", language(spec.language).name)
    for name in _LIMIT_FIELDS:
        value = getattr(spec, name)
        if value is None and name in ("memory_limit_bytes", "output_limit_bytes"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise CollimateUsageError(f"{name} must be a positive number, not {value!r}")
        if name != "compile_timeout" and not isinstance(value, int):
            raise CollimateUsageError(f"{name} must be a whole number of bytes, not {value!r}")


def limits_payload(spec: Any, source: str, *, assertions: bool = False) -> dict[str, Any]:
    """The payload fields for a spec's language and limits (none for Python by default).

    >>> from collimate_rl.grading import IOReward
    >>> limits_payload(IOReward([]), "print(1)")
    {}
    >>> sorted(limits_payload(IOReward([], language="bash"), "echo 1"))
    ['program']
    """
    out: dict[str, Any] = {}
    if spec.output_limit_bytes is not None:
        out["output_limit"] = int(spec.output_limit_bytes)
    lang = LANGUAGES["python"] if spec.language is None else language(spec.language)
    if lang.in_process:
        if spec.memory_limit_bytes is not None:
            out["run_limits"] = {"memory": int(spec.memory_limit_bytes)}
        return out
    out["program"] = program_payload(
        lang,
        source,
        memory_bytes=spec.memory_limit_bytes,
        compile_timeout=spec.compile_timeout,
        compile_memory_bytes=spec.compile_memory_bytes,
        compile_output_bytes=spec.compile_output_bytes,
        assertions=assertions,
    )
    return out
