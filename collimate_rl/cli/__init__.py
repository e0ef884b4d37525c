"""The ``collimate`` command line.

Commands (``collimate COMMAND --help`` for each):

* ``serve``: run the local node in the foreground; ``health``, ``templates``,
  ``sessions`` (``--reap``), ``bake``: look at and shape a node;
* ``exec``: a command, code or a file in a fresh sandbox; ``grade``: one
  completion against one task; ``eval``: pass@k of a completions JSONL (resumable,
  see :mod:`collimate_rl.evaluation`); ``replay``: re-run a replay manifest;
* ``top``: a live view of a node or a fleet (from their ``/metrics``);
* ``bench``: the benchmark suite; ``demo``: a GRPO group graded on a local node.

Client commands reach the node given by ``--url`` (``http://host:port`` or
``unix:/path``; with ``--api-key``, the gateway), else the one the environment
names (``$COLLIMATE_SERVE_SOCKET``, ``$COLLIMATE_API_KEY``, ``$COLLIMATE_SERVE_URL``),
else a local node started for the command. ``--json`` prints one JSON document;
progress bars go to stderr, only at a terminal.

Exit codes: 0 success; 1 the thing checked failed (a grade that did not pass, a
replay that did not reproduce, a draining node, a failed bake); 2 usage error or
bad input (a missing or malformed file, an unknown task set, task or template);
3 the node or gateway is unreachable or failed; 130 interrupted. ``exec`` exits
with the sandboxed command's status (124 when its timeout fired).

>>> main(["--version"])
collimate-rl ...
0
"""

from collimate_rl.cli._app import build_parser, main
from collimate_rl.cli._output import FAILED, INFRA, INTERRUPTED, OK, USAGE

__all__ = ["FAILED", "INFRA", "INTERRUPTED", "OK", "USAGE", "build_parser", "main"]
