"""A classic-BPF interpreter for seccomp programs (the subset seccomp filters use).

>>> import struct
>>> allow = struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)
>>> hex(run_bpf(allow, 0, 0))
'0x7fff0000'
"""

from __future__ import annotations

import struct


def run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The action ``prog`` returns for syscall ``nr`` of ``arch`` with ``args`` (64-bit each)."""
    return execute(prog, nr, arch, args)[0]


def execute(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> tuple[int, int]:
    """:func:`run_bpf`'s action, and how many instructions the program ran to decide it."""
    ins = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    argv = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *argv)
    acc = idx = 0
    mem = [0] * 16
    pc = 0
    for step in range(1, 1 << 16):
        code, jt, jf, k = ins[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            (acc,) = struct.unpack_from("<I", data, k)
        elif code == 0x00:  # ld #k
            acc = k
        elif code == 0x60:  # ld M[k]
            acc = mem[k]
        elif code == 0x02:  # st M[k]
            mem[k] = acc
        elif code == 0x07:  # tax
            idx = acc
        elif code == 0x87:  # txa
            acc = idx
        elif code == 0x54:  # and #k
            acc &= k
        elif code == 0x44:  # or #k
            acc |= k
        elif code == 0x05:  # ja k
            pc += k
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x25:
            pc += jt if acc > k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x45:
            pc += jt if acc & k else jf
        elif code == 0x06:
            return int(k), step
        elif code == 0x16:
            return int(acc), step
        else:  # pragma: no cover
            raise AssertionError(f"unexpected opcode {code:#x}")
    raise AssertionError("the program does not terminate")  # pragma: no cover
