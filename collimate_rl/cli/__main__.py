"""``python -m collimate_rl.cli`` is the ``collimate`` command."""

from collimate_rl.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
