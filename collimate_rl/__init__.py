"""collimate-rl: sandboxed code execution as reinforcement-learning environments."""

from collimate_rl._version import __version__

__all__ = ["__version__"]
