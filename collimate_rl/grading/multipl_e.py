"""MultiPL-E: HumanEval and MBPP translated into many languages, graded by exit code.

A MultiPL-E row has ``name``, ``language``, ``prompt`` (the function's signature and
documentation in that language), ``tests`` (code that checks the function and exits
non-zero on a failure) and ``stop_tokens``. As MultiPL-E does, the program is
``prompt + completion + "\\n" + tests`` and it passes when it exits with 0.

**Forgeable by design.** The tests run in the candidate's own process: a completion can
exit with 0 before they run (``exit(0)``, ``System.exit(0)``, ``process.exit(0)``) and
"pass". Every :class:`~collimate_rl.grading.GradeResult` of this spec says so
(``forgeable=True``); against an adversarial policy, prefer stdin/stdout tests
(:class:`~collimate_rl.grading.IOReward`) or Python's unforgeable specs.

>>> row = {"name": "HumanEval_53_add", "language": "cpp", "stop_tokens": ["\\n}"],
...        "prompt": "#include<assert.h>\\nlong add(long x, long y) {\\n",
...        "tests": "}\\nint main() {\\n    assert(add(2, 3) == 5);\\n}\\n"}
>>> spec = MultiPLEReward.from_row(row)
>>> spec.language, spec.forgeable
('cpp', True)
>>> spec.extract_source("```cpp\\nlong add(long x, long y) {\\n    return x + y;\\n}\\n```")
'    return x + y;'
>>> print(spec.program("    return x + y;"))
#include<assert.h>
long add(long x, long y) {
    return x + y;
}
int main() {
    assert(add(2, 3) == 5);
}
<BLANKLINE>
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collimate_rl.errors import CollimateUsageError
from collimate_rl.grading.extract import extract_code
from collimate_rl.grading.languages import (
    DEFAULT_COMPILE_MEMORY_BYTES,
    DEFAULT_COMPILE_OUTPUT_BYTES,
    DEFAULT_COMPILE_TIMEOUT,
    LANGUAGES,
    check_limits,
    language,
    program_payload,
)
from collimate_rl.grading.specs import _SPEC_TYPES, Program, RewardSpec

__all__ = ["ROW_KEYS", "MultiPLEReward"]

#: The keys a MultiPL-E row must have.
ROW_KEYS = ("name", "language", "prompt", "tests")

#: Go's MultiPL-E tests are a ``testing`` package: ``go test`` builds and runs them.
_GO_TEST = dataclasses.replace(
    LANGUAGES["go"], source="main_test.go", compile=(), run=("go", "test", "{source}")
)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.M)


def _signature(prompt: str, python: bool) -> str | None:
    """The prompt's last line that opens the function the completion continues."""
    for line in reversed(prompt.splitlines()):
        text = line.strip()
        if python and re.match(r"(?:async\s+)?def\s+\w+\s*\(", text):
            return text
        if not python and "(" in text and text.endswith("{"):
            return text
    return None


def _squash(text: str) -> str:
    return " ".join(text.split())


@dataclasses.dataclass(frozen=True)
class MultiPLEReward(RewardSpec):
    """A MultiPL-E row: the program holds its own tests and passes by exiting with 0.

    See the module docstring (forgeable by design). ``language`` is MultiPL-E's name
    (``cpp``, ``java``, ``js``, ``rs``, ``sh``, ``go``, ``py``) or ours. The completion may
    be a raw continuation of the prompt (cut at the first stop token, as MultiPL-E does)
    or a chat answer: the last fenced block, from after the prompt's signature line if it
    repeats it. Java runs with assertions on (``-ea``). Java rows that import
    ``org.javatuples`` need that jar on the template's ``CLASSPATH``.

    Limits: as :class:`~collimate_rl.grading.IOReward` (one run of ``per_test_timeout``).
    """

    prompt: str
    tests: str
    language: str
    _: dataclasses.KW_ONLY
    stop_tokens: Sequence[str] = ()
    name: str = ""
    all_or_nothing: bool = True
    per_test_timeout: float = 15.0
    memory_limit_bytes: int | None = None
    output_limit_bytes: int | None = None
    compile_timeout: float = DEFAULT_COMPILE_TIMEOUT
    compile_memory_bytes: int = DEFAULT_COMPILE_MEMORY_BYTES
    compile_output_bytes: int = DEFAULT_COMPILE_OUTPUT_BYTES
    kind: ClassVar[str] = "program_exit"
    #: The tests share the candidate's process: a pass can be faked.
    forgeable: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.per_test_timeout > 0:
            raise CollimateUsageError(
                f"per_test_timeout must be positive, not {self.per_test_timeout!r}"
            )
        for field in ("prompt", "tests"):
            if not isinstance(getattr(self, field), str):
                raise CollimateUsageError(f"MultiPLEReward.{field} must be text")
        tokens = self.stop_tokens
        if isinstance(tokens, str) or not all(isinstance(t, str) and t for t in tokens):
            raise CollimateUsageError("stop_tokens must be a list of non-empty strings")
        object.__setattr__(self, "stop_tokens", tuple(tokens))
        check_limits(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, all_or_nothing: bool = True) -> MultiPLEReward:
        """The spec for a MultiPL-E row (see :data:`ROW_KEYS`).

        Raises:
            CollimateUsageError: a key is missing or the language is not supported.
        """
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise CollimateUsageError(f"a MultiPL-E row needs {', '.join(missing)}")
        return cls(
            str(row["prompt"]),
            str(row["tests"]),
            str(row["language"]),
            stop_tokens=tuple(row.get("stop_tokens") or ()),
            name=str(row["name"]),
            all_or_nothing=all_or_nothing,
        )

    @property
    def extract_entry(self) -> str | None:
        return None

    def _cut(self, text: str) -> str:
        """``text`` up to the first stop token (MultiPL-E's truncation)."""
        cut = len(text)
        for token in self.stop_tokens:
            at = text.find(token)
            if at != -1:
                cut = min(cut, at)
        return text[:cut]

    def extract_source(self, completion: str) -> str:
        """The completion's continuation of the prompt (what goes between prompt and tests)."""
        text = completion.replace("\r\n", "\n")
        if not _FENCE.search(text):
            return self._cut(text).rstrip()  # a raw continuation keeps its indentation
        block = extract_code(text, language=self.language)
        anchor = _signature(self.prompt, self.language == "python")
        lines = block.split("\n")
        if anchor is not None:
            wanted = _squash(anchor)
            for index in range(len(lines) - 1, -1, -1):
                if _squash(lines[index]) == wanted:
                    lines = lines[index + 1 :]
                    break
        # extraction drops the final newline; stop tokens such as "\n    }\n" need it
        return self._cut("\n".join(lines) + "\n").rstrip()

    def program(self, body: str) -> str:
        """The whole program MultiPL-E runs for a completion ``body``."""
        prompt = self.prompt if self.prompt.endswith("\n") or not body else self.prompt + "\n"
        return f"{prompt}{body}\n{self.tests}"

    def build(
        self, candidate: str, *, nonce: str | None = None, timeout_seconds: float = 30.0
    ) -> Program:
        return super().build(self.program(candidate), nonce=nonce, timeout_seconds=timeout_seconds)

    def _payload(self, source: str) -> dict[str, Any]:
        lang = language(self.language)
        payload: dict[str, Any] = {"module": "__main__", "prelude": ""}
        if self.output_limit_bytes is not None:
            payload["output_limit"] = int(self.output_limit_bytes)
        if lang.in_process:
            if self.memory_limit_bytes is not None:
                payload["run_limits"] = {"memory": int(self.memory_limit_bytes)}
            return payload
        payload["program"] = program_payload(
            _GO_TEST if lang.name == "go" else lang,
            source,
            memory_bytes=self.memory_limit_bytes,
            compile_timeout=self.compile_timeout,
            compile_memory_bytes=self.compile_memory_bytes,
            compile_output_bytes=self.compile_output_bytes,
            assertions=True,
        )
        return payload


_SPEC_TYPES[MultiPLEReward.__name__] = MultiPLEReward  # spec_from_dict knows it (replay)
