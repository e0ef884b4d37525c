"""Seeding a warm Python process from an exec's 256-bit seed: ``random`` and numpy.

>>> seed_words("00" * 31 + "01")[-1]
1
"""

from __future__ import annotations

import struct
import sys
from typing import Any

_WORDS = struct.Struct(">8I")


class _NumpySeeder:
    """A meta-path hook: seeds numpy's legacy global RNG when it is imported."""

    def __init__(self, words: list[int]) -> None:
        self.words = words

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "numpy.random":
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _SeedingLoader(spec.loader, self.words)
                return spec
        return None


class _SeedingLoader:
    def __init__(self, inner: Any, words: list[int]) -> None:
        self._inner = inner
        self._words = words

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        module.seed(self._words)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def seed_words(seed: str) -> list[int]:
    """The 256-bit seed as eight uint32 words, most significant first.

    numpy's legacy ``seed()`` gets these; Python's ``random.seed(int)`` uses
    the same words least significant first, so the two streams differ.
    """
    low = int(seed, 16) & ((1 << 256) - 1)
    return list(_WORDS.unpack(low.to_bytes(32, "big")))  # (in C: a box's first call to it)


def apply_python_seed(seed: str) -> None:
    import random

    random.seed(int(seed, 16))
    words = seed_words(seed)
    npr = sys.modules.get("numpy.random")
    if npr is not None:
        npr.seed(words)
    else:
        sys.meta_path.insert(0, _NumpySeeder(words))
