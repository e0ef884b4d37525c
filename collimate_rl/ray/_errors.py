"""The fleet's own failures, in the SDK's error tree (both are infrastructure errors).

::

    CollimateTransportError
    ├── NodeLostError          the node holding a session (or running a call) is gone
    └── NoHealthyNodeError     no node of the fleet can take new work

Grading and the envs already treat every :class:`~collimate_rl.errors.CollimateError`
that is not a task error as an infrastructure failure: ``grade_batch(on_infra_error=
"zero")`` gives ``infra_error=True``, the vector env flags the member. Neither error is
ever folded into a reward.

>>> err = NodeLostError("n0a1b2c3d", "4f1c...", "its Ray node died", sent=True)
>>> isinstance(err, CollimateTransportError), err.node, err.sent
(True, 'n0a1b2c3d', True)
>>> print(err)
fleet node n0a1b2c3d (Ray node 4f1c...) was lost: its Ray node died; its sessions are gone
"""

from __future__ import annotations

from collimate_rl.errors import CollimateNotFoundError, CollimateTransportError

__all__ = ["NoHealthyNodeError", "NodeLostError", "unknown_node"]


class NodeLostError(CollimateTransportError):
    """The fleet node that holds the session, or that ran the call, was lost.

    Its sessions are gone for good: open new ones (the vector env does so on its next
    reset). A call whose node was declared lost before its answer arrived fails with this
    too, even if the node still answered: the fleet never hands out results of a node it
    has given up on.

    Attributes:
        node: the fleet node's tag (the prefix of its session ids).
        ray_node_id: the Ray node it ran on.
        sent: ``False`` when the request provably never ran (safe to place elsewhere).
    """

    def __init__(self, node: str, ray_node_id: str, reason: str, *, sent: bool) -> None:
        super().__init__(
            f"fleet node {node} (Ray node {ray_node_id}) was lost: {reason}; its sessions are gone"
        )
        self.node = node
        self.ray_node_id = ray_node_id
        self.sent = sent


class NoHealthyNodeError(CollimateTransportError):
    """No node of the fleet can take new work: none started, or all are lost or draining."""


def unknown_node(session_id: object, tag: str) -> CollimateNotFoundError:
    """The error for a session id naming a node this fleet never had (404 ``no_such_session``).

    >>> unknown_node("n0a1b2c3d.ses_1", "n0a1b2c3d").error_code
    'no_such_session'
    """
    return CollimateNotFoundError(
        f"no session {session_id!r}: node {tag} is not part of this fleet",
        status=404,
        error_code="no_such_session",
    )
