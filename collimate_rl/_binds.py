"""Where our servers listen: loopback by default, anything wider only when asked, loudly.

Every TCP server we start (``collimate serve``, ``python -m collimate_rl.openenv``,
the node's service bridges, the OpenEnv provider's tunnel) binds ``127.0.0.1``
unless told otherwise. Binding a wider address runs untrusted code for whoever
can reach the port, so it is an explicit opt-in that logs a warning.

>>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost")
(True, True, True)
>>> is_loopback("0.0.0.0"), is_loopback("10.1.2.3"), is_loopback("")
(False, False, False)
>>> exposure_warning("127.0.0.1", "the node") is None
True
>>> print(exposure_warning("0.0.0.0", "the node", hint="add --token-file"))
the node listens on 0.0.0.0: every host that can reach this port can use it (add --token-file)
"""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["DEFAULT_HOST", "exposure_warning", "is_loopback"]

#: The default bind address of every server we start.
DEFAULT_HOST: Final = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, what: str, *, hint: str = "") -> str | None:
    """The warning to log when ``what`` binds ``host`` beyond loopback, else ``None``."""
    if is_loopback(host):
        return None
    scope = "every host that can reach this port" if host else "every host on the network"
    return f"{what} listens on {host or '*'}: {scope} can use it" + (f" ({hint})" if hint else "")
