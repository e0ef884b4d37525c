"""``python -m collimate_rl.openenv [--env-id ID] [--host H] [--port P]``: serve a collimate env."""

from __future__ import annotations

import argparse

from collimate_rl.openenv._server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env-id", default=None, help="default: $COLLIMATE_ENV_ID or Code-v0")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-concurrent-envs", type=int, default=16)
    args = parser.parse_args(argv)
    serve(args.env_id, host=args.host, port=args.port, max_concurrent_envs=args.max_concurrent_envs)


if __name__ == "__main__":
    main()
