"""The trusted modules a Python template's fork-server defines before any session exists.

Today that is the grading harness (``collimate_harness``): every exec child
then has it warm, so a grade ships a short stub instead of the ~80 KB harness
and does not load it again (see ``collimate_rl/grading/_shipping.py``). The
sources travel in the template's config; the fork-server records each one's
sha256 as ``WARM_DIGEST`` (``_sandbox/factory.load_warm_modules``).

>>> sorted(warm_modules("python3")), warm_modules("bash")
(['collimate_harness'], {})
"""

from __future__ import annotations

__all__ = ["warm_modules"]


def warm_modules(interpreter: str) -> dict[str, str]:
    """Module name -> source for a template whose ``code`` execs run ``interpreter``."""
    if interpreter != "python3":
        return {}
    from collimate_rl.grading._shipping import warm_module

    name, source = warm_module()
    return {name: source}
