"""Where things are inside a template container (``bwrap`` driver), and fd conventions.

>>> SANDBOX_DIR, ZYGOTE_FD
('/sandbox', 4)
"""

from __future__ import annotations

#: The fd (and the env var naming it) of an exec's connection to the factory.
ZYGOTE_FD = 4
ZYGOTE_ENV = "COLLIMATE_ZYGOTE_FD"

#: Paths inside the container (``bwrap`` driver).
INTERNAL_DIR = "/.collimate"
#: A light session's lineage anchor (``members.py``): its sessions' layer dirs.
ANCHOR_DIR = "/.collimate/s"
#: An empty, read-only dir in the anchor that every box binds over ``INTERNAL_DIR``.
COVER_DIR = "/.collimate/s/.cover"
SANDBOX_DIR = "/sandbox"
#: The uid (and gid) sandboxed code runs as, inside every namespace.
SANDBOX_ID = 1000
SITE_DIR = "/opt/collimate/site"
BIN_DIR = "/opt/collimate/bin"
