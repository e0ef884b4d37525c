"""Templates and environments: bake on the gateway, declare a width, release it.

A *template* is what sandboxes fork from. On the managed gateway you bake one
from an image (:meth:`Template.bake`, with :class:`Ready` saying when a warm
clone is ready), watch it converge (:meth:`TemplateHandle.wait`) and declare
the warm width you expect to use. :func:`environment` (what
``client.env(ref, width=...)`` calls) picks the right path for a reference
and returns an :class:`Env`: a context manager that releases a declared width
on exit and hands out :class:`~collimate_rl.sandbox.Sandbox` handles.

On the local node (or the plain daemon) templates are built in: an
:class:`Env` on a template id is a plain handle and ``width`` is only a hint.
Baking there needs a node bake endpoint that does not exist yet, so asking for
one raises :class:`~collimate_rl.errors.CollimateUsageError` naming the
gateway.

>>> Ready(cmd="python3 -c 'import numpy'", ports=[8080]).to_wire()
{'cmd': "python3 -c 'import numpy'", 'ports': [8080]}
>>> TemplateStatus.from_response({"id": "t1", "phase": "Live", "warm": 3,
...     "frozen": 1, "converge_state": "converged"}).total
4
"""

from collimate_rl.templates._environments import (
    AsyncEnv,
    Env,
    environment,
    environment_async,
)
from collimate_rl.templates._handles import (
    AsyncTemplate,
    AsyncTemplateHandle,
    Template,
    TemplateHandle,
)
from collimate_rl.templates._ready import Ready
from collimate_rl.templates._status import PHASE_RANK, TemplateBakeFailed, TemplateStatus
from collimate_rl.wire._environments import provide_environments

__all__ = [
    "PHASE_RANK",
    "AsyncEnv",
    "AsyncTemplate",
    "AsyncTemplateHandle",
    "Env",
    "Ready",
    "Template",
    "TemplateBakeFailed",
    "TemplateHandle",
    "TemplateStatus",
    "environment",
    "environment_async",
]

# ``client.env(...)`` on every wire client makes its environment here; the wire
# layer does not import this package (see collimate_rl.wire._environments).
provide_environments(environment, environment_async)
