"""Clients of the managed gateway (``https://api.collimate.ai``), Bearer ``col_*`` keys.

Besides the gateway's own surface (images, templates, sandboxes, fork,
suspend/resume, connect URLs, usage) both clients offer the daemon's session
surface (``create_session``, ``session_exec``, ``exec_once``, ``get_session``,
``list_sessions``, ``delete_session``, ``fork_session``) so that code written
against :class:`~collimate_rl.wire.daemon.CollimateClient` works unchanged.

>>> gw = GatewayClient("col_demo_abcd1234_" + "s" * 32, "https://gw.example/pfx/")
>>> gw.tier, gw.fork_cap, gw.base
('demo', 4, 'https://gw.example/pfx')
>>> gw.connect_url("sb1", 70000)
Traceback (most recent call last):
...
collimate_rl.errors.CollimateUsageError: port must be an int in 1..65535, got 70000
"""

from collimate_rl.wire._gateway_async import AsyncGatewayClient
from collimate_rl.wire._gateway_sync import GatewayClient

__all__ = ["AsyncGatewayClient", "GatewayClient"]
