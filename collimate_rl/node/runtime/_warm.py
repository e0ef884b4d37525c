"""The trusted modules a Python template's fork-server defines before any session exists.

Today that is the grading harness (``collimate_harness``): every exec child
then has it warm, so a grade ships a short stub instead of the ~80 KB harness
and does not load it again (see ``collimate_rl/grading/_shipping.py``). Each
travels in the template's config compiled here (the sandbox runs this
interpreter build): a code object (``marshal``, zlib, base64) and its
source's sha256, which the fork-server records as ``WARM_DIGEST``
(``_sandbox/factory.load_warm_modules``). Not compiling in the sandbox keeps
the parser's memory out of the warm image that every session forks.

>>> mods = warm_modules("python3")
>>> sorted(mods), sorted(mods["collimate_harness"]), warm_modules("bash")
(['collimate_harness'], ['code', 'digest', 'tag'], {})
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import marshal
import sys
import types
import zlib

__all__ = [
    "HARNESS_MIN_PYTHON",
    "compile_block",
    "full_program_for",
    "harness_source",
    "warm_modules",
    "warm_stub_for",
]

#: The oldest Python the grading harness runs in (the package's own floor).
HARNESS_MIN_PYTHON = (3, 10)


def warm_modules(interpreter: str) -> dict[str, dict[str, str]]:
    """Module name -> compiled module for a template whose ``code`` execs run ``interpreter``."""
    if interpreter != "python3":
        return {}
    from collimate_rl.grading._shipping import warm_module

    name, source = warm_module()
    return {name: _compiled(name, source)}


@functools.cache
def _compiled(name: str, source: str) -> dict[str, str]:
    code = compile(source, f"<{name}>", "exec", dont_inherit=True)
    return {
        "digest": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "tag": f"{sys.implementation.cache_tag}-{sys.hexversion:x}",  # factory.marshal_tag()
        "code": binascii.b2a_base64(zlib.compress(marshal.dumps(code), 9), newline=False).decode(),
    }


def harness_source() -> str:
    """The harness as source: what an image's warm fork-server compiles in the image's own
    Python (``_sandbox/image_zygote.py``), where this build's code objects do not load.

    >>> "def grade_payload" in harness_source()
    True
    """
    from collimate_rl.grading._shipping import harness_source as source

    return source()


def warm_stub_for(payload_path: str) -> str:
    """The exact ``code`` of a grade that runs this node's warm harness on ``payload_path``.

    >>> "collimate_harness" in warm_stub_for("/tmp/p.json")
    True
    """
    from collimate_rl.grading._shipping import warm_stub

    return warm_stub(payload_path)


def full_program_for(payload_path: str) -> str:
    """The self-contained grading program for ``payload_path``: what a grade becomes in a
    template whose ``python3`` is not the node's (an image's), where no harness is warm.

    The node sends it in place of the warm stub, so the client is not told of a miss (it
    would then ship the full program to every template of the node, warm ones too).

    >>> "collimate: entry" in full_program_for("/tmp/p.json")
    True
    """
    from collimate_rl.grading._shipping import full_program

    return full_program(payload_path)


def compile_block(source: str, index: int) -> tuple[types.CodeType, int]:
    """A test block compiled as the warm harness compiles it: (code, assert count).

    The harness's own function, in this interpreter build (the sandbox's): a worker
    given the result runs exactly what it would have compiled (``workers.py``).

    >>> compile_block("assert 1 == 1; assert 2 == 2", 0)[1]
    2
    """
    from collimate_rl.grading._asserts import _compiled_block

    code, static = _compiled_block(source, index)
    return code, static
