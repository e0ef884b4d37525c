"""``--egress POLICY``: an egress policy on the command line (``exec``, ``bake``).

A policy is JSON in the contract's shapes, or a shorthand:

=================================  ==========================================
``none`` / ``open``                ``{"mode": "none"}`` / ``{"mode": "open"}``
``allow:pypi.org,*.pythonhosted.org``  ``{"allow": ["pypi.org", "*.pythonhosted.org"]}``
``deny:github.com``                ``{"deny": ["github.com"]}``
``preset:rl-leakage``              ``{"preset": "rl-leakage"}``
=================================  ==========================================

The node validates it (a malformed one is a 400 naming the field).

>>> parse_egress("allow:pypi.org, files.pythonhosted.org")
{'allow': ['pypi.org', 'files.pythonhosted.org']}
>>> parse_egress('{"mode": "none"}')
{'mode': 'none'}
"""

from __future__ import annotations

import json
from typing import Any

from collimate_rl.errors import CollimateUsageError

__all__ = ["EGRESS_HELP", "parse_egress"]

EGRESS_HELP = (
    "egress policy of a networked template (docs/egress.md): JSON, or none, open, "
    "allow:HOST[,HOST...], deny:HOST[,HOST...], preset:NAME"
)


def parse_egress(text: str) -> dict[str, Any]:
    """The policy dict ``text`` stands for; :class:`CollimateUsageError` if it is neither form."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise CollimateUsageError(f"--egress: not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise CollimateUsageError("--egress: the JSON must be an object")
        return value
    if text in ("none", "open"):
        return {"mode": text}
    kind, sep, rest = text.partition(":")
    items = [item.strip() for item in rest.split(",") if item.strip()]
    if sep and kind in ("allow", "deny"):
        return {kind: items}
    if sep and kind == "preset" and len(items) == 1:
        return {"preset": items[0]}
    raise CollimateUsageError(
        f"--egress {text!r}: expected JSON, none, open, allow:HOSTS, deny:HOSTS or preset:NAME"
    )
