"""Split one command's CPU samples into page faults, exit, syscalls and user code.

    perf record -F 4000 -a -g -o /tmp/box.data -- <a benchmark>
    perf script -i /tmp/box.data --comm col-candidate | python benchmarks/perf_split.py

Reads ``perf script`` output (call chains, leaf first) and files each sample under the
first of its frames that names a category: a page fault, the process's exit, or a syscall
(by name); a sample with none of them is user code (or the kernel outside those), filed
under its leaf frame. Prints the share of each, largest first. Used to compare a candidate
box with the warm-fork floor's child (``--exclude-pid`` drops the floor's fork server,
whose children share its command name): see ``docs/fast-path.md``, round 15.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Iterator

#: Frames that name a category, checked leaf first; a syscall is named by its entry point.
CATEGORIES = {
    "asm_exc_page_fault": "page faults",
    "do_exit": "exit",
}
SYSCALL_PREFIXES = ("__x64_sys_", "__do_sys_")


def samples(lines: Iterable[str], exclude_pid: str | None) -> Iterator[list[str]]:
    """Each sample's frames (function names, leaf first)."""
    frames: list[str] | None = None
    for line in lines:
        if not line.strip():
            if frames:
                yield frames
            frames = None
        elif not line[0].isspace():  # a sample's header: "comm pid [cpu] time: ..."
            header = line.split()
            frames = None if exclude_pid is not None and header[1] == exclude_pid else []
        elif frames is not None:
            parts = line.split()
            if len(parts) >= 2:
                frames.append(parts[1].split("+")[0])
    if frames:
        yield frames


def category(frames: list[str]) -> str:
    """The category of a sample (see the module's docstring)."""
    for frame in frames:
        if frame in CATEGORIES:
            return CATEGORIES[frame]
        if frame.startswith(SYSCALL_PREFIXES):
            name = frame.split("sys_", 1)[1]
            return f"syscall {name}"
    return f"other: {frames[0]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exclude-pid", help="drop this process's samples")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    counts = Counter(category(f) for f in samples(sys.stdin, args.exclude_pid))
    total = sum(counts.values())
    if not total:
        raise SystemExit("no samples: is the command name right?")
    print(f"{total} samples")
    for name, count in counts.most_common(args.top):
        print(f"{100 * count / total:6.2f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
