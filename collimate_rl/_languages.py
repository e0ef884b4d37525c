"""The language table: how each built-in language's programs are built and run.

Shared by the grader (:mod:`collimate_rl.grading.languages`, which re-exports it and turns it
into harness payloads) and the node (which offers a template per toolchain it finds): plain
data and name lookups, importing nothing above the base layer.

A :class:`Language` is data. It names the fence tags extraction accepts, the file the
source goes in, and the compile and run command lines. Those use plain tool names looked up
on the sandbox's ``PATH`` (``g++``, ``javac``, ``node``, ...), so they work on any template
that has the toolchain: the local node's built-in language templates, or an image of your
own on a Collimate gateway.

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

import dataclasses
import re
from collections.abc import Mapping, Sequence

from collimate_rl.errors import CollimateUsageError

__all__ = [
    "DEFAULT_COMPILE_MEMORY_BYTES",
    "DEFAULT_COMPILE_OUTPUT_BYTES",
    "DEFAULT_COMPILE_TIMEOUT",
    "DEFAULT_MEMORY_BYTES",
    "FENCE_TAGS",
    "LANGUAGES",
    "Language",
    "language",
    "language_of_template",
]

#: Per-case memory for programs in other languages (RLIMIT_AS plus the language's slack).
DEFAULT_MEMORY_BYTES = 1 << 30
#: Wall-clock seconds the compiler may take (within the exec's own timeout).
DEFAULT_COMPILE_TIMEOUT = 30.0
#: Address space the compiler may use.
DEFAULT_COMPILE_MEMORY_BYTES = 2 << 30
#: Compiler output kept; more than this is a compile error (an endless template error).
DEFAULT_COMPILE_OUTPUT_BYTES = 1 << 20

_MIB = 1 << 20
# Java: every JVM thread reserves its own stack and the heap is capped by -Xmx, so the
# address space gets room beyond the heap (the heap is what "memory" means for Java).
_JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:-UsePerfData",  # no hsperfdata files in /tmp, a faster start
)


@dataclasses.dataclass(frozen=True)
class Language:
    """How one language's programs are built and run.

    Command lines may use ``{source}`` (the file name), ``{main}`` (Java's class),
    ``{memory_mb}`` (the per-case memory), ``{compile_heap_mb}`` (half the compiler's
    memory) and the single argument ``{assertions}`` (``assertions`` when a spec asks for
    them, else nothing).

    Attributes:
        name: the canonical name (``"cpp"``).
        title: the human name (``"C++"``).
        fences: fence tags that mark a block in this language (the first is canonical).
        source: the file the candidate's source is written to.
        compile: the compiler's command line; empty for interpreted languages.
        run: the command line of one run; empty for Python (the warm interpreter).
        aliases: other names :func:`language` accepts.
        templates: the local node's template ids that mean this language.
        memory_slack_bytes: address space allowed beyond the memory limit (runtimes that
            reserve far more than they use: the JVM, V8, Go).
        stack_bytes: the stack limit of a run (``None``: the template's).
        assertions: the run arguments that enable assertions (Java's ``-ea``).
        env: environment defaults for the compiler and the runs (a template's own
            values win).
    """

    name: str
    title: str
    fences: tuple[str, ...]
    source: str
    compile: tuple[str, ...] = ()
    run: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    templates: tuple[str, ...] = ()
    memory_slack_bytes: int = 0
    stack_bytes: int | None = None
    assertions: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def in_process(self) -> bool:
        """Python: the candidate runs in the warm interpreter, not as a built program."""
        return not self.run

    @property
    def toolchain(self) -> tuple[str, ...]:
        """The binaries a template needs on its ``PATH`` for this language."""
        tools = [argv[0] for argv in (self.compile, self.run) if argv and "/" not in argv[0]]
        return tuple(dict.fromkeys(tools))

    def main_name(self, source: str) -> str:
        """Java's class to run: the public one, else the one with ``main``, else ``Main``.

        >>> LANGUAGES["java"].main_name("class Problem {\\n public static void main(String[] a) {} }")
        'Problem'
        """
        if self.name != "java":
            return "main"
        text = _strip_java_comments(source)
        public = re.search(
            r"\bpublic\s+(?:(?:final|abstract|strictfp)\s+)*class\s+([A-Za-z_$][\w$]*)", text
        )
        if public:
            return public.group(1)
        classes = list(re.finditer(r"\bclass\s+([A-Za-z_$][\w$]*)", text))
        main = re.search(r"\bstatic\s+(?:final\s+)?void\s+main\s*\(", text)
        if main:
            before = [c for c in classes if c.start() < main.start()]
            if before:
                return before[-1].group(1)
        return classes[0].group(1) if classes else "Main"

    def source_file(self, source: str) -> str:
        """The file name ``source`` is written to (Java's follows its class)."""
        return self.source.format(main=self.main_name(source))

    def commands(
        self,
        source: str,
        *,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        compile_memory_bytes: int = DEFAULT_COMPILE_MEMORY_BYTES,
        assertions: bool = False,
    ) -> tuple[list[str], list[str]]:
        """The compile (empty: none) and run command lines for ``source``, filled in.

        >>> LANGUAGES["cpp"].commands("int main() {}")
        (['g++', '-std=gnu++17', '-O2', '-pipe', '-o', 'main', 'main.cpp'], ['./main'])
        """
        fields = {
            "source": self.source_file(source),
            "main": self.main_name(source),
            "memory_mb": str(max(16, memory_bytes // _MIB)),
            "compile_heap_mb": str(max(64, compile_memory_bytes // 2 // _MIB)),
        }
        extra = self.assertions if assertions else ()
        return _expand(self.compile, fields, extra), _expand(self.run, fields, extra)


def _strip_java_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


_C_STACK = 256 * _MIB

#: The built-in languages by canonical name.
LANGUAGES: Mapping[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "python",
            "Python",
            ("python", "py", "python3", "py3"),
            "main.py",
            aliases=("python3", "py", "py3"),
            templates=("python3", "py", "python"),
        ),
        Language(
            "c",
            "C",
            ("c",),
            "main.c",
            compile=("gcc", "-std=gnu11", "-O2", "-pipe", "-o", "main", "{source}", "-lm"),
            run=("./main",),
            templates=("c",),
            stack_bytes=_C_STACK,
        ),
        Language(
            "cpp",
            "C++",
            ("cpp", "c++", "cc", "cxx"),
            "main.cpp",
            compile=("g++", "-std=gnu++17", "-O2", "-pipe", "-o", "main", "{source}"),
            run=("./main",),
            aliases=("c++", "cxx", "cc"),
            templates=("cpp",),
            stack_bytes=_C_STACK,
        ),
        Language(
            "java",
            "Java",
            ("java",),
            "{main}.java",
            compile=(
                "javac",
                "-encoding",
                "UTF-8",
                "-J-XX:TieredStopAtLevel=1",
                "-J-Xmx{compile_heap_mb}m",
                *(f"-J{flag}" for flag in _JVM_FLAGS),
                "{source}",
            ),
            run=("java", "-Xss64m", "-Xmx{memory_mb}m", *_JVM_FLAGS, "{assertions}", "{main}"),
            templates=("java",),
            memory_slack_bytes=2 << 30,
            assertions=("-ea",),
            # javac and java read it; a template may add jars (".:/opt/lib/x.jar")
            env=(("CLASSPATH", "."),),
        ),
        Language(
            "javascript",
            "JavaScript",
            ("javascript", "js", "node", "nodejs", "mjs"),
            "main.js",
            # a syntax error is a compile error, as in the compiled languages
            compile=("node", "--check", "{source}"),
            run=("node", "--max-old-space-size={memory_mb}", "{source}"),
            aliases=("js", "node", "nodejs"),
            templates=("javascript", "js"),
            memory_slack_bytes=1 << 30,
        ),
        Language(
            "rust",
            "Rust",
            ("rust", "rs"),
            "main.rs",
            compile=("rustc", "--edition", "2021", "-O", "-o", "main", "{source}"),
            run=("./main",),
            aliases=("rs",),
            templates=("rust", "rs"),
            stack_bytes=_C_STACK,
        ),
        Language(
            "bash",
            "Bash",
            ("bash", "sh", "shell"),
            "main.sh",
            compile=("bash", "-n", "{source}"),
            run=("bash", "{source}"),
            aliases=("sh", "shell"),
            templates=("bash", "sh"),
        ),
        Language(
            "go",
            "Go",
            ("go", "golang"),
            "main.go",
            compile=("go", "build", "-o", "main", "{source}"),
            run=("./main",),
            aliases=("golang", "go_test.go"),  # MultiPL-E calls it go_test.go
            templates=("go",),
            memory_slack_bytes=256 * _MIB,
            # the build cache must be writable; /tmp is the session's own
            env=(("GOCACHE", "/tmp/.cache/go-build"), ("GOPATH", "/tmp/go")),
        ),
    )
}

#: Fence tags per language, for :func:`~collimate_rl.grading.extract_code`'s ``language=``.
FENCE_TAGS: Mapping[str, tuple[str, ...]] = {
    name: lang.fences for name, lang in LANGUAGES.items() if name != "python"
}

_BY_NAME: dict[str, Language] = {}
for _lang in LANGUAGES.values():
    for _key in (_lang.name, *_lang.aliases):
        _BY_NAME[_key] = _lang
_BY_TEMPLATE: dict[str, str] = {t: lang.name for lang in LANGUAGES.values() for t in lang.templates}


def language(name: str) -> Language:
    """The language called ``name`` (a canonical name or an alias, any case).

    Raises:
        CollimateUsageError: an unknown name; the message lists the known ones.

    >>> language("JS").name
    'javascript'
    >>> language("cobol")
    Traceback (most recent call last):
    ...
    collimate_rl.errors.CollimateUsageError: unknown language 'cobol'; known: ...
    """
    if not isinstance(name, str):
        raise CollimateUsageError(f"a language is a name, not {type(name).__name__}")
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        known = ", ".join(sorted(_BY_NAME))
        raise CollimateUsageError(f"unknown language {name!r}; known: {known}")
    return found


#: The suffix of a built-in template's networked twin (``cpp-net``): the same language.
_NETWORK_TWIN = "-net"


def language_of_template(template_id: str) -> str | None:
    """The language a template id stands for on the local node, or ``None`` (unknown id).

    A built-in's networked twin stands for the same language. A template of your own (a
    bake, a gateway image) says nothing about its language: name it on the spec
    (``IOReward(cases, language="cpp")``).

    >>> language_of_template("cpp-net"), language_of_template("my-net")
    ('cpp', None)
    """
    return _BY_TEMPLATE.get(template_id.removesuffix(_NETWORK_TWIN))


def _expand(argv: Sequence[str], fields: Mapping[str, str], assertions: Sequence[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if arg == "{assertions}":
            out.extend(assertions)
        else:
            out.append(arg.format(**fields))
    return out
