"""``python -m collimate_rl.openenv [--env-id ID] [--host H] [--port P]``: serve a collimate env.

It listens on ``127.0.0.1`` unless ``--host`` says otherwise: whoever reaches
the port can run code in our sandboxes. ``--host 0.0.0.0`` is an explicit
opt-in (it logs a warning); see docs/security.md for exposing it to a trainer.
"""

from __future__ import annotations

import argparse

from collimate_rl._binds import DEFAULT_HOST
from collimate_rl.openenv._server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env-id", default=None, help="default: $COLLIMATE_ENV_ID or Code-v0")
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}); 0.0.0.0 exposes it to every "
        "host that can reach the port, and logs a warning",
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-concurrent-envs", type=int, default=16)
    args = parser.parse_args(argv)
    serve(args.env_id, host=args.host, port=args.port, max_concurrent_envs=args.max_concurrent_envs)


if __name__ == "__main__":
    main()
