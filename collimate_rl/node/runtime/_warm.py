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
import zlib

__all__ = ["warm_modules"]


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
