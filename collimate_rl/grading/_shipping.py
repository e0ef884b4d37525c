"""How the in-sandbox harness gets into the sandbox: assembled, compacted, or already warm.

The harness is ten stdlib-only parts (``_prologue``, ``_codec``, ``_child_exec``,
``_child``, ``_spawner``, ``_harness``, ``_build``, ``_compare``, ``_asserts``,
``_grader``) joined into one program. An
exec carries it in one of two forms:

* the **warm stub** (a few hundred bytes): the prologue, then a call into the
  module ``collimate_harness`` that the local node defined in its template
  fork-server from :func:`warm_module` before any session existed; the stub
  runs it only if its digest equals this client's harness digest. Otherwise it
  prints :data:`HARNESS_MISS`, exits with :data:`MISS_EXIT_CODE` having run
  nothing, and the grader resends the exec with the full program;
* the **full program** (about 80 KB): the prologue, then T and Z as code
  objects compiled here once (``marshal``, zlib, base64) when the sandbox runs
  this interpreter build, else their source (zlib, base64) compiled there.

Either way the trusted process T runs the same code (see :mod:`._harness`).

>>> name, source = warm_module()
>>> name, source.count("from __future__")
('collimate_harness', 1)
>>> stub = warm_stub("/tmp/colgrade_00.json")
>>> len(stub) < 2000 and HARNESS_MISS in stub and harness_digest() in stub
True
"""

from __future__ import annotations
import __future__

import binascii
import functools
import hashlib
import marshal
import re
import sys
import zlib
from pathlib import Path

__all__ = [
    "HARNESS_MISS",
    "MISS_EXIT_CODE",
    "WARM_MODULE",
    "full_program",
    "harness_digest",
    "warm_module",
    "warm_stub",
]

#: The module name the local node gives the warm harness (see the node runtime README).
WARM_MODULE = "collimate_harness"
#: The line a warm stub prints when the sandbox has no matching warm harness.
HARNESS_MISS = "COLLIMATE_HARNESS_MISS"
#: ... and its exit code (nothing else ran).
MISS_EXIT_CODE = 3

#: The harness parts, in shipping order; Z runs codec + child (see ``_harness``).
_PARTS = (
    "_prologue",
    "_codec",
    "_child_exec",
    "_child",
    "_spawner",
    "_harness",
    "_build",
    "_compare",
    "_asserts",
    "_grader",
)
_ZYGOTE_PARTS = ("_codec", "_child_exec", "_child")
# Run on its own (in T, which defines _ZYGOTE_CODE first, it only defines), the child
# part serves as Z, or as C when the factory spawned it for that (see _harness).
_ZYGOTE_TRAILER = """
if __name__ == "__main__" and "_ZYGOTE_CODE" not in globals():
    _serve_as_spawned()
"""
# A parenthesised intra-package import marked on its first line, through its ")".
_STRIPPED_BLOCK = re.compile(r"^from \.\w+ import \(  # collimate: strip\n.*?^\)\n", re.M | re.S)


@functools.cache
def _harness_texts() -> dict[str, str]:
    """Each part's text, intra-package imports removed."""
    here = Path(__file__).parent
    texts = {}
    for name in _PARTS:
        text = _STRIPPED_BLOCK.sub("", (here / f"{name}.py").read_text(encoding="utf-8"))
        kept = [ln for ln in text.splitlines() if not ln.rstrip().endswith("# collimate: strip")]
        texts[name] = "\n".join(kept)
    return texts


def _zygote_text() -> str:
    texts = _harness_texts()
    return "\n".join(texts[name] for name in _ZYGOTE_PARTS) + _ZYGOTE_TRAILER


def _t_text() -> str:
    texts = _harness_texts()
    chunks = []
    for name in _PARTS:
        if name not in _ZYGOTE_PARTS and name != "_prologue":
            chunks += [f"# collimate: part {name.lstrip('_')}", texts[name]]
    return "\n".join(chunks) + "\n"


@functools.cache
def harness_source() -> str:
    """The in-sandbox program as source: the parts concatenated.

    Z's parts (codec and child) ship as one string that T compiles once
    (``_ZYGOTE_CODE``), executes for itself and hands to Z as ``marshal``
    data, so Z never compiles anything.
    """
    chunks = [
        _harness_texts()["_prologue"],
        "# collimate: part zygote",
        f"_ZYGOTE_SOURCE = {_zygote_text()!r}",
        "_ZYGOTE_CODE = compile(_ZYGOTE_SOURCE, '<collimate-zygote>', 'exec')",
        "exec(_ZYGOTE_CODE)",
    ]
    return "\n".join(chunks) + "\n" + _t_text()


@functools.cache
def harness_digest() -> str:
    """sha256 of :func:`harness_source`: a warm harness is used only if it has this digest."""
    return hashlib.sha256(harness_source().encode("utf-8")).hexdigest()


def warm_module() -> tuple[str, str]:
    """``(module name, source)`` for a node to define once per template, before any session.

    The node records the source's sha256 as the module's ``WARM_DIGEST``
    (see the node runtime's ``factory.load_warm_modules``).
    """
    return WARM_MODULE, harness_source()


def marshal_tag() -> str:
    # must match _spawner._marshal_tag and the node's factory.marshal_tag
    return f"{sys.implementation.cache_tag}-{sys.hexversion:x}"


def _packed(data: bytes) -> str:
    return binascii.b2a_base64(zlib.compress(data, 9), newline=False).decode("ascii")


@functools.cache
def _full_program_head() -> str:
    flags = __future__.annotations.compiler_flag
    # optimize=2: no docstrings (the harness has no asserts; its test code is compiled in T)
    zcode = compile(
        _zygote_text(), "<collimate-zygote>", "exec", flags=flags, dont_inherit=True, optimize=2
    )
    tcode = compile(
        _t_text(), "<collimate-harness>", "exec", flags=flags, dont_inherit=True, optimize=2
    )
    blob = _packed(marshal.dumps((zcode, tcode)))
    source = _packed(harness_source().encode("utf-8"))
    lines = [
        _harness_texts()["_prologue"],  # first: trust only the stdlib's import paths
        "# collimate: part loader",
        "import binascii as _binascii, marshal as _marshal, sys as _sys, zlib as _zlib",
        f"if f'{{_sys.implementation.cache_tag}}-{{_sys.hexversion:x}}' == {marshal_tag()!r}:",
        f"    _ZYGOTE_CODE, _T_CODE = _marshal.loads(_zlib.decompress(_binascii.a2b_base64({blob!r})))",
        "    exec(_ZYGOTE_CODE)",
        "    exec(_T_CODE)",
        "else:",
        f"    _SOURCE = _zlib.decompress(_binascii.a2b_base64({source!r})).decode('utf-8')",
        "    exec(compile(_SOURCE, '<collimate-harness>', 'exec'))",
    ]
    return "\n".join(lines) + "\n"


def full_program(payload_path: str) -> str:
    """The self-contained program: T and Z precompiled for this build, else their source.

    Compiling the ~60 KB harness costs the sandbox ~15-20 ms per grade; when
    the sandbox runs this interpreter build (the local node does) it loads
    the code objects this process compiled once. Any other build compiles
    :func:`harness_source`.
    """
    return _full_program_head() + f"\n# collimate: entry\nmain({payload_path!r})\n"


def warm_stub(payload_path: str) -> str:
    """The short program that runs the node's warm harness, or reports a miss having run nothing.

    The warm module lives in T's own memory, inherited from the template
    fork-server, which defined it from the node's files before any session
    or request existed: nothing a candidate can write. The prologue runs
    first, so T's later imports come from the stdlib only.
    """
    lines = [
        _harness_texts()["_prologue"],
        "# collimate: part warm",
        "import sys as _sys",
        f"_warm = _sys.modules.get({WARM_MODULE!r})",
        f"if getattr(_warm, 'WARM_DIGEST', None) == {harness_digest()!r}:",
        f"    _warm.main({payload_path!r})",
        "else:  # no warm harness here: leave nothing behind, say so",
        "    import os as _os",
        f"    for _path in ({payload_path!r}, _os.environ.get('COLLIMATE_CODE_FILE', '')):",
        "        try:",
        "            _os.unlink(_path)",
        "        except OSError:",
        "            pass",
        f"    print({HARNESS_MISS!r}, flush=True)",
        f"    raise SystemExit({MISS_EXIT_CODE})",
    ]
    return "\n".join(lines) + "\n"
