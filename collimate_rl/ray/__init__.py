"""Scale out on Ray: one local sandbox node per Ray node, behind one client.

>>> import ray  # doctest: +SKIP
>>> from collimate_rl.ray import RayFleet
>>> ray.init()  # doctest: +SKIP
>>> with RayFleet() as fleet:  # doctest: +SKIP
...     client = fleet.client()
...     sid = client.create_session("python3")["session_id"]
...     fleet.node_of(sid).state
<NodeState.HEALTHY: 'healthy'>

Importing this package needs no Ray; :meth:`RayFleet.start` does (the ``ray`` extra).
See docs/scale-out.md.
"""

from collimate_rl.ray._async_client import AsyncFleetClient
from collimate_rl.ray._client import FleetClient
from collimate_rl.ray._directory import FleetNode, NodeLoad, NodeState
from collimate_rl.ray._errors import NodeLostError, NoHealthyNodeError
from collimate_rl.ray._fleet import RayFleet
from collimate_rl.ray._observe import FleetStats, NodeStats

__all__ = [
    "AsyncFleetClient",
    "FleetClient",
    "FleetNode",
    "FleetStats",
    "NoHealthyNodeError",
    "NodeLoad",
    "NodeLostError",
    "NodeState",
    "NodeStats",
    "RayFleet",
]
