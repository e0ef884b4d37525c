"""Authoring source of the bundled ``collimate-basic`` task set (original problems).

The shipped data is ``collimate_envs/tasks/data/collimate_basic.jsonl``; regenerate it after
editing this file with::

    .venv/bin/python tests/envs/tasks/_tasks_basic_source.py

A test checks that the shipped file matches what this module builds.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

DATA_FILE = (
    Path(__file__).resolve().parents[3]
    / "collimate_envs"
    / "tasks"
    / "data"
    / "collimate_basic.jsonl"
)


def _c(code: str) -> str:
    return textwrap.dedent(code).strip("\n") + "\n"


def _p(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


def _fn(
    slug: str,
    difficulty: str,
    entry: str,
    prompt: str,
    ref: str,
    wrong: str,
    *,
    unit: list[tuple[tuple[Any, ...], Any]] | None = None,
    gen: str | None = None,
    k: int = 50,
    tags: tuple[str, ...] = (),
) -> dict[str, Any]:
    tests: dict[str, Any]
    if unit is not None:
        tests = {"kind": "unit", "cases": [{"args": list(a), "expected": e} for a, e in unit]}
    else:
        assert gen is not None
        tests = {"kind": "property", "generator": gen, "k": k, "seed": 0}
    return {
        "task_id": f"basic/{slug}",
        "prompt": _p(prompt),
        "entry_point": entry,
        "difficulty": difficulty,
        "tags": list(tags),
        "tests": tests,
        "reference_solution": _c(ref),
        "wrong_solution": _c(wrong),
    }


def _io(
    slug: str,
    difficulty: str,
    prompt: str,
    ref: str,
    wrong: str,
    cases: list[tuple[str, str]],
    *,
    tags: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "task_id": f"basic/{slug}",
        "prompt": _p(prompt),
        "difficulty": difficulty,
        "tags": ["stdio", *tags],
        "tests": {"kind": "io", "cases": [{"stdin": i, "stdout": o} for i, o in cases]},
        "reference_solution": _c(ref),
        "wrong_solution": _c(wrong),
    }


# ============================================================================================
# easy

EASY = [
    _fn(
        "count-vowels",
        "easy",
        "count_vowels",
        """
        Write a Python function `count_vowels(s: str) -> int` that returns how many characters
        of `s` are vowels. The vowels are `a`, `e`, `i`, `o` and `u`, in lower or upper case;
        `y` is not a vowel. `s` may be empty and may contain any characters.
        Example: `count_vowels("Banana Split")` returns `4`.
        """,
        """
        def count_vowels(s):
            return sum(1 for c in s if c in "aeiouAEIOU")
        """,
        """
        def count_vowels(s):
            return sum(1 for c in s if c in "aeiou")
        """,
        unit=[
            (("",), 0),
            (("rhythm",), 0),
            (("Education",), 5),
            (("AEIOU aeiou y",), 10),
            (("Quick brown FOX",), 4),
            (("xyz123!",), 0),
            (("Banana Split",), 4),
        ],
        tags=("strings",),
    ),
    _fn(
        "second-largest",
        "easy",
        "second_largest",
        """
        Write a Python function `second_largest(nums: list[int]) -> int | None` that returns the
        second largest *distinct* value in `nums`, or `None` when `nums` has fewer than two
        distinct values. Examples: `second_largest([4, 9, 9, 2])` returns `4`;
        `second_largest([5, 5])` returns `None`; `second_largest([])` returns `None`.
        """,
        """
        def second_largest(nums):
            distinct = sorted(set(nums))
            return distinct[-2] if len(distinct) >= 2 else None
        """,
        """
        def second_largest(nums):
            if len(nums) < 2:
                return None
            return sorted(nums)[-2]
        """,
        gen="([random.randint(-5, 5) for _ in range(random.randint(0, 8))],)",
        tags=("lists",),
    ),
    _fn(
        "clamp-all",
        "easy",
        "clamp_all",
        """
        Write a Python function `clamp_all(values: list[int], lo: int, hi: int) -> list[int]`
        that returns a new list in which every value below `lo` is replaced by `lo` and every
        value above `hi` is replaced by `hi`; other values are kept. You may assume
        `lo <= hi`. Do not modify `values`.
        Example: `clamp_all([-5, 3, 12], 0, 10)` returns `[0, 3, 10]`.
        """,
        """
        def clamp_all(values, lo, hi):
            return [min(max(v, lo), hi) for v in values]
        """,
        """
        def clamp_all(values, lo, hi):
            return [lo if v < lo else v for v in values]
        """,
        gen=(
            "(lambda lo, width: ([random.randint(-30, 30) for _ in range(random.randint(0, 10))],"
            " lo, lo + width))(random.randint(-10, 10), random.randint(0, 15))"
        ),
        tags=("lists",),
    ),
    _fn(
        "run-length-encode",
        "easy",
        "rle",
        """
        Write a Python function `rle(s: str) -> str` that run-length encodes `s`: every maximal
        run of one repeated character is replaced by that character followed by the run length
        written in decimal. `s` contains only lowercase letters and may be empty (then return
        `""`). Examples: `rle("aaabcc")` returns `"a3b1c2"`; `rle("zzzzzzzzzzzz")` returns
        `"z12"`.
        """,
        """
        from itertools import groupby


        def rle(s):
            return "".join(ch + str(len(list(run))) for ch, run in groupby(s))
        """,
        """
        def rle(s):
            out = []
            count = 1
            for i in range(1, len(s)):
                if s[i] == s[i - 1]:
                    count += 1
                else:
                    out.append(s[i - 1] + str(count))
                    count = 1
            return "".join(out)
        """,
        gen=(
            '("".join(random.choice("ab") * random.randint(1, 12)'
            " for _ in range(random.randint(0, 6))),)"
        ),
        tags=("strings",),
    ),
    _fn(
        "clean-palindrome",
        "easy",
        "is_clean_palindrome",
        """
        Write a Python function `is_clean_palindrome(s: str) -> bool` that returns `True` when
        `s` reads the same forwards and backwards after removing every character that is not
        a letter or a digit (as decided by `str.isalnum`) and lower-casing the rest. A string
        with no letters or digits (including `""`) counts as a palindrome.
        Example: `is_clean_palindrome("Step on no pets!")` returns `True`.
        """,
        """
        def is_clean_palindrome(s):
            kept = [c.lower() for c in s if c.isalnum()]
            return kept == kept[::-1]
        """,
        """
        def is_clean_palindrome(s):
            t = s.lower()
            return t == t[::-1]
        """,
        unit=[
            (("",), True),
            (("Step on no pets!",), True),
            (("race a car",), False),
            (("No 'x' in Nixon",), True),
            (("12321",), True),
            (("ab",), False),
            (("!!",), True),
            (("Was it a car or a cat I saw?",), True),
            (("abca",), False),
        ],
        tags=("strings",),
    ),
    _fn(
        "digit-sum",
        "easy",
        "digit_sum",
        """
        Write a Python function `digit_sum(n: int) -> int` that returns the sum of the decimal
        digits of the absolute value of `n`. Examples: `digit_sum(472)` returns `13`,
        `digit_sum(-472)` returns `13`, `digit_sum(0)` returns `0`.
        """,
        """
        def digit_sum(n):
            return sum(int(c) for c in str(abs(n)))
        """,
        """
        def digit_sum(n):
            total = 0
            while n > 0:
                total += n % 10
                n //= 10
            return total
        """,
        gen="(random.randint(-10**6, 10**6),)",
        tags=("math",),
    ),
    _fn(
        "chunk",
        "easy",
        "chunk",
        """
        Write a Python function `chunk(items: list[int], size: int) -> list[list[int]]` that
        splits `items` into consecutive pieces of length `size`, in order; the last piece is
        shorter when `len(items)` is not a multiple of `size`. `size >= 1`. An empty list gives
        `[]`. Example: `chunk([1, 2, 3, 4, 5], 2)` returns `[[1, 2], [3, 4], [5]]`.
        """,
        """
        def chunk(items, size):
            return [items[i : i + size] for i in range(0, len(items), size)]
        """,
        """
        def chunk(items, size):
            return [items[i : i + size] for i in range(0, len(items) - size + 1, size)]
        """,
        gen="([random.randint(0, 9) for _ in range(random.randint(0, 15))], random.randint(1, 5))",
        tags=("lists",),
    ),
    _fn(
        "count-words",
        "easy",
        "count_words",
        """
        Write a Python function `count_words(text: str) -> int` that returns the number of words
        in `text`, where a word is a maximal run of non-whitespace characters. The text may
        contain spaces, tabs and newlines, runs of several of them, leading or trailing
        whitespace, or be empty. Example: `count_words("  to be\\tor  not ")` returns `4`.
        """,
        """
        def count_words(text):
            return len(text.split())
        """,
        """
        def count_words(text):
            return len(text.split(" ")) if text else 0
        """,
        unit=[
            (("",), 0),
            (("hello",), 1),
            (("hello world",), 2),
            (("  leading and trailing  ",), 3),
            (("tabs\tand\nnewlines",), 3),
            (("a  b   c",), 3),
            (("   ",), 0),
            (("  to be\tor  not ",), 4),
        ],
        tags=("strings",),
    ),
    _fn(
        "clock-time",
        "easy",
        "to_clock",
        """
        Write a Python function `to_clock(minutes: int) -> str` that converts a number of minutes
        after midnight into a 24-hour clock reading `"HH:MM"` (two digits each). `minutes` may
        be negative or larger than a day; the clock wraps around every 1440 minutes.
        Examples: `to_clock(75)` returns `"01:15"`, `to_clock(1440)` returns `"00:00"`,
        `to_clock(-1)` returns `"23:59"`.
        """,
        """
        def to_clock(minutes):
            m = minutes % 1440
            return f"{m // 60:02d}:{m % 60:02d}"
        """,
        """
        def to_clock(minutes):
            h, m = divmod(abs(minutes), 60)
            return f"{h % 24:02d}:{m:02d}"
        """,
        gen="(random.randint(-3000, 5000),)",
        tags=("math", "strings"),
    ),
    _fn(
        "collapse-runs",
        "easy",
        "collapse_runs",
        """
        Write a Python function `collapse_runs(items: list[int]) -> list[int]` that returns a new
        list where every run of equal *adjacent* elements is replaced by a single copy.
        Non-adjacent repeats stay. Example: `collapse_runs([1, 1, 2, 1, 1, 3])` returns
        `[1, 2, 1, 3]`; `collapse_runs([])` returns `[]`.
        """,
        """
        def collapse_runs(items):
            out = []
            for x in items:
                if not out or out[-1] != x:
                    out.append(x)
            return out
        """,
        """
        def collapse_runs(items):
            return list(dict.fromkeys(items))
        """,
        gen="([random.randint(0, 3) for _ in range(random.randint(0, 12))],)",
        tags=("lists",),
    ),
    _fn(
        "max-step",
        "easy",
        "max_step",
        """
        Write a Python function `max_step(nums: list[int]) -> int` that returns the largest
        absolute difference between two neighbouring elements of `nums`, or `0` when `nums`
        has fewer than two elements. Example: `max_step([3, 10, 1])` returns `9`.
        """,
        """
        def max_step(nums):
            return max((abs(a - b) for a, b in zip(nums, nums[1:])), default=0)
        """,
        """
        def max_step(nums):
            return max((b - a for a, b in zip(nums, nums[1:])), default=0)
        """,
        gen="([random.randint(-50, 50) for _ in range(random.randint(0, 10))],)",
        tags=("lists",),
    ),
    _fn(
        "capitalize-words",
        "easy",
        "capitalize_words",
        """
        Write a Python function `capitalize_words(s: str) -> str`. `s` consists of words
        separated by single spaces (no leading or trailing space); words contain letters,
        digits and apostrophes. Return `s` with the first character of every word upper-cased
        and all its other characters lower-cased (a first character that is not a letter is
        kept as it is). `""` gives `""`.
        Examples: `capitalize_words("don't STOP")` returns `"Don't Stop"`;
        `capitalize_words("3rd place")` returns `"3rd Place"`.
        """,
        """
        def capitalize_words(s):
            return " ".join(w[:1].upper() + w[1:].lower() for w in s.split(" "))
        """,
        """
        def capitalize_words(s):
            return s.title()
        """,
        unit=[
            (("hello world",), "Hello World"),
            (("",), ""),
            (("don't STOP",), "Don't Stop"),
            (("3rd place",), "3rd Place"),
            (("mIxEd",), "Mixed"),
            (("a b c",), "A B C"),
        ],
        tags=("strings",),
    ),
    _fn(
        "sum-of-multiples",
        "easy",
        "sum_of_multiples",
        """
        Write a Python function `sum_of_multiples(limit: int, a: int, b: int) -> int` that
        returns the sum of all integers `n` with `1 <= n < limit` that are divisible by `a` or
        by `b` (a number divisible by both is counted once). `0 <= limit <= 10000`,
        `1 <= a, b <= 20`. Example: `sum_of_multiples(10, 3, 5)` returns `23`.
        """,
        """
        def sum_of_multiples(limit, a, b):
            return sum(n for n in range(1, limit) if n % a == 0 or n % b == 0)
        """,
        """
        def sum_of_multiples(limit, a, b):
            return sum(range(a, limit, a)) + sum(range(b, limit, b))
        """,
        gen="(random.randint(0, 300), random.randint(1, 12), random.randint(1, 12))",
        tags=("math",),
    ),
    _fn(
        "rotate-left",
        "easy",
        "rotate_left",
        """
        Write a Python function `rotate_left(items: list[int], k: int) -> list[int]` that returns
        `items` rotated left by `k` positions: the element at index `k` comes first. `k` may be
        larger than the length (rotate by `k` modulo the length) or negative (a negative `k`
        rotates right). An empty list gives `[]`.
        Examples: `rotate_left([1, 2, 3, 4], 1)` returns `[2, 3, 4, 1]`;
        `rotate_left([1, 2, 3, 4], -1)` returns `[4, 1, 2, 3]`;
        `rotate_left([1, 2, 3], 7)` returns `[2, 3, 1]`.
        """,
        """
        def rotate_left(items, k):
            if not items:
                return []
            k %= len(items)
            return items[k:] + items[:k]
        """,
        """
        def rotate_left(items, k):
            if not items:
                return []
            return items[k:] + items[:k]
        """,
        gen="([random.randint(0, 9) for _ in range(random.randint(0, 8))], random.randint(-20, 20))",
        tags=("lists",),
    ),
    _fn(
        "sign-counts",
        "easy",
        "sign_counts",
        """
        Write a Python function `sign_counts(nums: list[int]) -> list[int]` that returns a list
        of three counts `[positives, negatives, zeros]` for the integers in `nums`.
        Example: `sign_counts([3, -1, 0, 7, 0])` returns `[2, 1, 2]`.
        """,
        """
        def sign_counts(nums):
            pos = sum(1 for n in nums if n > 0)
            neg = sum(1 for n in nums if n < 0)
            return [pos, neg, len(nums) - pos - neg]
        """,
        """
        def sign_counts(nums):
            pos = sum(1 for n in nums if n >= 0)
            neg = sum(1 for n in nums if n < 0)
            return [pos, neg, nums.count(0)]
        """,
        gen="([random.randint(-3, 3) for _ in range(random.randint(0, 10))],)",
        tags=("lists",),
    ),
    _fn(
        "initials",
        "easy",
        "initials",
        """
        Write a Python function `initials(name: str) -> str` that returns the first character of
        every word of `name`, upper-cased and each followed by a period, with no spaces.
        Words are separated by one or more spaces and there may be leading or trailing spaces.
        A name without words gives `""`. Example: `initials("ada  king lovelace")` returns
        `"A.K.L."`.
        """,
        """
        def initials(name):
            return "".join(w[0].upper() + "." for w in name.split())
        """,
        """
        def initials(name):
            return ".".join(w[0].upper() for w in name.split())
        """,
        unit=[
            (("ada  king lovelace",), "A.K.L."),
            (("grace  brewster murray hopper  ",), "G.B.M.H."),
            (("",), ""),
            (("x",), "X."),
            (("   ",), ""),
            (("Alan Turing",), "A.T."),
        ],
        tags=("strings",),
    ),
    _fn(
        "interleave",
        "easy",
        "interleave",
        """
        Write a Python function `interleave(a: list[int], b: list[int]) -> list[int]` that
        returns `a[0], b[0], a[1], b[1], ...`; once one list runs out, the remaining elements of
        the other follow in order. Example: `interleave([1, 2, 3], [7])` returns
        `[1, 7, 2, 3]`.
        """,
        """
        def interleave(a, b):
            out = []
            for i in range(max(len(a), len(b))):
                if i < len(a):
                    out.append(a[i])
                if i < len(b):
                    out.append(b[i])
            return out
        """,
        """
        def interleave(a, b):
            return [x for pair in zip(a, b) for x in pair]
        """,
        gen=(
            "([random.randint(0, 9) for _ in range(random.randint(0, 6))],"
            " [random.randint(10, 19) for _ in range(random.randint(0, 6))])"
        ),
        tags=("lists",),
    ),
    _fn(
        "leap-year",
        "easy",
        "is_leap_year",
        """
        Write a Python function `is_leap_year(year: int) -> bool` using the Gregorian rule: a
        year is a leap year when it is divisible by 4, except years divisible by 100, which are
        leap years only when also divisible by 400. `1 <= year <= 9999`.
        Examples: 2024 -> `True`, 1900 -> `False`, 2000 -> `True`, 2023 -> `False`.
        """,
        """
        def is_leap_year(year):
            return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        """,
        """
        def is_leap_year(year):
            return year % 4 == 0 and year % 100 != 0
        """,
        gen=(
            "(random.choice([random.randint(1, 9999), random.randint(1, 99) * 100,"
            " random.randint(1, 24) * 400]),)"
        ),
        tags=("math",),
    ),
    _io(
        "pair-sums",
        "easy",
        """
        Write a Python program that reads from standard input. The first line holds an integer
        `n` (`0 <= n <= 100`). Each of the next `n` lines holds two integers `a` and `b`
        separated by a space (`|a|, |b| <= 10^9`). Print `n` lines: the value of `a + b` for
        each pair, in input order.
        """,
        """
        import sys

        data = sys.stdin.read().split()
        n = int(data[0])
        for i in range(n):
            print(int(data[1 + 2 * i]) + int(data[2 + 2 * i]))
        """,
        """
        n = int(input())
        for _ in range(n):
            a, b = input().split()
            print(a + b)
        """,
        [
            ("3\n1 2\n-5 5\n1000000000 1000000000\n", "3\n0\n2000000000\n"),
            ("0\n", ""),
            ("1\n-7 -8\n", "-15\n"),
        ],
    ),
    _io(
        "reverse-words",
        "easy",
        """
        Write a Python program that reads one line from standard input: one or more words
        separated by single spaces. Print the same words in reverse order, separated by single
        spaces.
        """,
        """
        print(" ".join(input().split()[::-1]))
        """,
        """
        print(input()[::-1])
        """,
        [
            ("the quick brown fox\n", "fox brown quick the\n"),
            ("single\n", "single\n"),
            ("ab cd\n", "cd ab\n"),
        ],
        tags=("strings",),
    ),
    _fn(
        "hamming",
        "easy",
        "hamming",
        """
        Write a Python function `hamming(a: str, b: str) -> int` that returns the number of
        positions at which `a` and `b` hold different characters, or `-1` when the two strings
        have different lengths. Example: `hamming("karolin", "kathrin")` returns `3`.
        """,
        """
        def hamming(a, b):
            if len(a) != len(b):
                return -1
            return sum(x != y for x, y in zip(a, b))
        """,
        """
        def hamming(a, b):
            return sum(x != y for x, y in zip(a, b))
        """,
        unit=[
            (("karolin", "kathrin"), 3),
            (("", ""), 0),
            (("abc", "abd"), 1),
            (("abc", "ab"), -1),
            (("same", "same"), 0),
            (("a", "bb"), -1),
        ],
        tags=("strings",),
    ),
    _fn(
        "floor-mean",
        "easy",
        "floor_mean",
        """
        Write a Python function `floor_mean(nums: list[int]) -> int | None` that returns the
        arithmetic mean of `nums` rounded down (towards negative infinity), or `None` for an
        empty list. Examples: `floor_mean([1, 2])` returns `1`; `floor_mean([-1, -2])` returns
        `-2`.
        """,
        """
        def floor_mean(nums):
            return sum(nums) // len(nums) if nums else None
        """,
        """
        def floor_mean(nums):
            return int(sum(nums) / len(nums)) if nums else None
        """,
        gen="([random.randint(-100, 100) for _ in range(random.randint(0, 7))],)",
        tags=("math",),
    ),
    _fn(
        "most-frequent-char",
        "easy",
        "most_frequent_char",
        """
        Write a Python function `most_frequent_char(s: str) -> str` that returns the character
        occurring most often in `s`. When several characters are equally frequent, return the
        one whose first occurrence in `s` comes first. Return `""` for an empty string.
        Example: `most_frequent_char("cabbac")` returns `"c"`.
        """,
        """
        def most_frequent_char(s):
            best, best_count = "", 0
            for c in s:
                n = s.count(c)
                if n > best_count:
                    best, best_count = c, n
            return best
        """,
        """
        def most_frequent_char(s):
            return max(sorted(set(s)), key=s.count) if s else ""
        """,
        gen='("".join(random.choice("abcd") for _ in range(random.randint(0, 10))),)',
        tags=("strings",),
    ),
    _fn(
        "neighbour-sums",
        "easy",
        "neighbour_sums",
        """
        Write a Python function `neighbour_sums(nums: list[int]) -> list[int]` that returns the
        sums of neighbouring pairs: `[nums[0] + nums[1], nums[1] + nums[2], ...]`, a list one
        shorter than `nums`. Lists with fewer than two elements give `[]`. The last and first
        elements are not neighbours. Example: `neighbour_sums([1, 4, 2])` returns `[5, 6]`.
        """,
        """
        def neighbour_sums(nums):
            return [a + b for a, b in zip(nums, nums[1:])]
        """,
        """
        def neighbour_sums(nums):
            return [nums[i] + nums[(i + 1) % len(nums)] for i in range(len(nums))]
        """,
        gen="([random.randint(-9, 9) for _ in range(random.randint(0, 7))],)",
        tags=("lists",),
    ),
    _fn(
        "caesar",
        "easy",
        "caesar",
        """
        Write a Python function `caesar(text: str, shift: int) -> str` that shifts every ASCII
        letter of `text` by `shift` places in the alphabet, wrapping around from `z` to `a`, and
        keeps its case; all other characters are unchanged. `shift` may be negative or larger
        than 26. Example: `caesar("Zoo, yes!", 2)` returns `"Bqq, agu!"`.
        """,
        """
        def caesar(text, shift):
            out = []
            for c in text:
                if "a" <= c <= "z":
                    out.append(chr((ord(c) - 97 + shift) % 26 + 97))
                elif "A" <= c <= "Z":
                    out.append(chr((ord(c) - 65 + shift) % 26 + 65))
                else:
                    out.append(c)
            return "".join(out)
        """,
        """
        def caesar(text, shift):
            out = []
            for c in text:
                if c.isalpha():
                    out.append(chr((ord(c.lower()) - 97 + shift) % 26 + 97))
                else:
                    out.append(c)
            return "".join(out)
        """,
        gen=(
            '("".join(random.choice("abcXYZ -!") for _ in range(random.randint(0, 12))),'
            " random.randint(-60, 60))"
        ),
        tags=("strings",),
    ),
    _io(
        "min-max",
        "easy",
        """
        Write a Python program that reads from standard input. The first line holds an integer
        `n` (`1 <= n <= 1000`); the second line holds `n` integers separated by spaces. Print
        the smallest and the largest of them on one line, separated by a single space.
        """,
        """
        n = int(input())
        nums = list(map(int, input().split()))
        print(min(nums), max(nums))
        """,
        """
        n = int(input())
        nums = input().split()
        print(min(nums), max(nums))
        """,
        [
            ("5\n3 -1 10 7 2\n", "-1 10\n"),
            ("1\n42\n", "42 42\n"),
            ("4\n9 100 25 -3\n", "-3 100\n"),
        ],
    ),
]

# ============================================================================================
# medium

MEDIUM = [
    _fn(
        "balanced-brackets",
        "medium",
        "is_balanced",
        """
        Write a Python function `is_balanced(s: str) -> bool` that returns `True` when the
        brackets `()`, `[]` and `{}` in `s` are balanced and properly nested: every closing
        bracket matches the most recent unclosed opening bracket of the same type, and none
        stays open. All other characters are ignored; `""` is balanced.
        Examples: `"a(b[c]d)e"` -> `True`; `"([)]"` -> `False`.
        """,
        """
        def is_balanced(s):
            pairs = {")": "(", "]": "[", "}": "{"}
            stack = []
            for ch in s:
                if ch in "([{":
                    stack.append(ch)
                elif ch in pairs:
                    if not stack or stack.pop() != pairs[ch]:
                        return False
            return not stack
        """,
        """
        def is_balanced(s):
            for opening, closing in ("()", "[]", "{}"):
                depth = 0
                for ch in s:
                    if ch == opening:
                        depth += 1
                    elif ch == closing:
                        depth -= 1
                        if depth < 0:
                            return False
                if depth != 0:
                    return False
            return True
        """,
        unit=[
            (("",), True),
            (("([]{})",), True),
            (("([)]",), False),
            (("((",), False),
            (("a(b[c]d)e",), True),
            (("}{",), False),
            (("{[()()]}",), True),
            (("(]",), False),
            (("x",), True),
        ],
        tags=("strings", "stack"),
    ),
    _fn(
        "merge-intervals",
        "medium",
        "merge_intervals",
        """
        Write a Python function `merge_intervals(intervals: list[list[int]]) -> list[list[int]]`.
        Each interval is `[start, end]` with `start <= end`; the intervals come in any order.
        Merge every group of intervals that overlap or touch (share an endpoint) and return the
        merged intervals sorted by start. Do not modify the input. `[]` gives `[]`.
        Example: `merge_intervals([[8, 9], [1, 3], [3, 5]])` returns `[[1, 5], [8, 9]]`.
        """,
        """
        def merge_intervals(intervals):
            merged = []
            for start, end in sorted(intervals):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            return merged
        """,
        """
        def merge_intervals(intervals):
            merged = []
            for start, end in intervals:
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            return merged
        """,
        gen=(
            "([[a, a + random.randint(0, 6)] for a in"
            " [random.randint(0, 30) for _ in range(random.randint(0, 7))]],)"
        ),
        tags=("intervals", "sorting"),
    ),
    _fn(
        "longest-increasing-run",
        "medium",
        "longest_increasing_run",
        """
        Write a Python function `longest_increasing_run(nums: list[int]) -> int` that returns
        the length of the longest contiguous segment of `nums` in which every element is
        strictly greater than the one before it. An empty list gives `0`; a single element is a
        run of length 1. Example: `longest_increasing_run([5, 1, 2, 2, 3, 4, 0])` returns `3`.
        """,
        """
        def longest_increasing_run(nums):
            best = current = 0
            for i, x in enumerate(nums):
                current = current + 1 if i > 0 and x > nums[i - 1] else 1
                best = max(best, current)
            return best
        """,
        """
        def longest_increasing_run(nums):
            best = current = 0
            for i, x in enumerate(nums):
                current = current + 1 if i > 0 and x >= nums[i - 1] else 1
                best = max(best, current)
            return best
        """,
        gen="([random.randint(0, 5) for _ in range(random.randint(0, 12))],)",
        tags=("lists",),
    ),
    _fn(
        "spiral-order",
        "medium",
        "spiral_order",
        """
        Write a Python function `spiral_order(matrix: list[list[int]]) -> list[int]` that
        returns the elements of a rectangular matrix (all rows have the same length) in
        clockwise spiral order: start at the top-left corner, go right along the top row, down
        the right column, left along the bottom row, up the left column, then continue inwards.
        Each element appears exactly once. `[]` and `[[]]` give `[]`.
        Example: `spiral_order([[1, 2], [3, 4], [5, 6]])` returns `[1, 2, 4, 6, 5, 3]`.
        """,
        """
        def spiral_order(matrix):
            out = []
            if not matrix or not matrix[0]:
                return out
            top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
            while top <= bottom and left <= right:
                for j in range(left, right + 1):
                    out.append(matrix[top][j])
                for i in range(top + 1, bottom + 1):
                    out.append(matrix[i][right])
                if top < bottom:
                    for j in range(right - 1, left - 1, -1):
                        out.append(matrix[bottom][j])
                if left < right:
                    for i in range(bottom - 1, top, -1):
                        out.append(matrix[i][left])
                top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
            return out
        """,
        """
        def spiral_order(matrix):
            out = []
            if not matrix or not matrix[0]:
                return out
            top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
            while top <= bottom and left <= right:
                for j in range(left, right + 1):
                    out.append(matrix[top][j])
                for i in range(top + 1, bottom + 1):
                    out.append(matrix[i][right])
                for j in range(right - 1, left - 1, -1):
                    out.append(matrix[bottom][j])
                for i in range(bottom - 1, top, -1):
                    out.append(matrix[i][left])
                top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
            return out
        """,
        unit=[
            (([],), []),
            (([[]],), []),
            (([[1, 2, 3], [4, 5, 6], [7, 8, 9]],), [1, 2, 3, 6, 9, 8, 7, 4, 5]),
            (([[1, 2, 3, 4]],), [1, 2, 3, 4]),
            (([[1], [2], [3]],), [1, 2, 3]),
            (([[1, 2], [3, 4], [5, 6]],), [1, 2, 4, 6, 5, 3]),
            (
                ([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],),
                [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7],
            ),
        ],
        tags=("matrix",),
    ),
    _fn(
        "word-frequencies",
        "medium",
        "word_frequencies",
        """
        Write a Python function `word_frequencies(text: str) -> list[list]`. A word is a maximal
        run of ASCII letters (`a`-`z`, `A`-`Z`); everything else separates words. Words are
        compared case-insensitively and reported in lower case. Return a list of
        `[word, count]` pairs sorted by count (largest first) and, for equal counts,
        alphabetically. Example: `word_frequencies("b a c b a")` returns
        `[["a", 2], ["b", 2], ["c", 1]]`.
        """,
        """
        import re
        from collections import Counter


        def word_frequencies(text):
            counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
            return [[w, n] for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        """,
        """
        import re
        from collections import Counter


        def word_frequencies(text):
            counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
            return [[w, n] for w, n in sorted(counts.items(), key=lambda kv: -kv[1])]
        """,
        unit=[
            (("",), []),
            (("the cat and the hat",), [["the", 2], ["and", 1], ["cat", 1], ["hat", 1]]),
            (("Go go GO! stop.",), [["go", 3], ["stop", 1]]),
            (("b a c b a",), [["a", 2], ["b", 2], ["c", 1]]),
            (("it's 2 o'clock",), [["clock", 1], ["it", 1], ["o", 1], ["s", 1]]),
        ],
        tags=("strings", "sorting"),
    ),
    _fn(
        "pair-with-sum",
        "medium",
        "pair_with_sum",
        """
        Write a Python function `pair_with_sum(nums: list[int], target: int) -> list[int]` that
        returns indices `[i, j]` with `i < j` and `nums[i] + nums[j] == target`. When several
        pairs qualify, return the one with the smallest `j`, and among those the smallest `i`.
        Return `[]` when there is no such pair.
        Examples: `pair_with_sum([3, 6, 4, 7], 10)` returns `[1, 2]` (not `[0, 3]`);
        `pair_with_sum([1, 2], 5)` returns `[]`.
        """,
        """
        def pair_with_sum(nums, target):
            for j in range(len(nums)):
                for i in range(j):
                    if nums[i] + nums[j] == target:
                        return [i, j]
            return []
        """,
        """
        def pair_with_sum(nums, target):
            for i in range(len(nums)):
                for j in range(i + 1, len(nums)):
                    if nums[i] + nums[j] == target:
                        return [i, j]
            return []
        """,
        gen=(
            "(lambda xs: (xs, random.randint(0, 12) if random.random() < 0.2 else"
            " sum(random.sample(xs, 2))))([random.randint(0, 6) for _ in range(random.randint(2, 10))])"
        ),
        k=100,
        tags=("lists", "search"),
    ),
    _fn(
        "to-roman",
        "medium",
        "to_roman",
        """
        Write a Python function `to_roman(n: int) -> str` that writes `n` (`1 <= n <= 3999`) in
        Roman numerals with the symbols I=1, V=5, X=10, L=50, C=100, D=500, M=1000, using the
        subtractive forms IV=4, IX=9, XL=40, XC=90, CD=400 and CM=900 (so 4 is `"IV"`, not
        `"IIII"`). Examples: `to_roman(1994)` returns `"MCMXCIV"`; `to_roman(58)` returns
        `"LVIII"`.
        """,
        """
        def to_roman(n):
            table = [
                (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
            ]
            out = []
            for value, symbol in table:
                count, n = divmod(n, value)
                out.append(symbol * count)
            return "".join(out)
        """,
        """
        def to_roman(n):
            table = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]
            out = []
            for value, symbol in table:
                count, n = divmod(n, value)
                out.append(symbol * count)
            return "".join(out)
        """,
        gen="(random.randint(1, 3999),)",
        tags=("strings", "math"),
    ),
    _fn(
        "rle-decode",
        "medium",
        "rle_decode",
        """
        Write a Python function `rle_decode(s: str) -> str` that expands a run-length encoded
        string. `s` is a sequence of groups, each a lowercase letter followed by a positive
        count written in decimal without leading zeros; counts may have several digits. Each
        group stands for its letter repeated count times. `""` gives `""`.
        Example: `rle_decode("a3b12")` returns `"aaa"` followed by twelve `"b"`s.
        """,
        """
        import re


        def rle_decode(s):
            return "".join(ch * int(count) for ch, count in re.findall(r"([a-z])(\\d+)", s))
        """,
        """
        def rle_decode(s):
            return "".join(s[i] * int(s[i + 1]) for i in range(0, len(s), 2))
        """,
        gen=(
            '("".join(random.choice("xyz") + str(random.randint(1, 15))'
            " for _ in range(random.randint(0, 5))),)"
        ),
        tags=("strings", "parsing"),
    ),
    _fn(
        "next-permutation",
        "medium",
        "next_permutation",
        """
        Write a Python function `next_permutation(items: list[int]) -> list[int]` that returns
        the arrangement of `items` that comes right after it in lexicographic order. If `items`
        is already the last arrangement (non-increasing), return the first one (sorted
        ascending). Values may repeat. Return a new list; do not modify `items`.
        Examples: `[1, 2, 3]` -> `[1, 3, 2]`; `[1, 3, 2]` -> `[2, 1, 3]`; `[3, 2, 1]` ->
        `[1, 2, 3]`; `[1, 1, 2]` -> `[1, 2, 1]`.
        """,
        """
        def next_permutation(items):
            a = list(items)
            i = len(a) - 2
            while i >= 0 and a[i] >= a[i + 1]:
                i -= 1
            if i < 0:
                return a[::-1]
            j = len(a) - 1
            while a[j] <= a[i]:
                j -= 1
            a[i], a[j] = a[j], a[i]
            a[i + 1 :] = reversed(a[i + 1 :])
            return a
        """,
        """
        def next_permutation(items):
            a = list(items)
            i = len(a) - 2
            while i >= 0 and a[i] >= a[i + 1]:
                i -= 1
            if i < 0:
                return a
            j = len(a) - 1
            while a[j] <= a[i]:
                j -= 1
            a[i], a[j] = a[j], a[i]
            a[i + 1 :] = reversed(a[i + 1 :])
            return a
        """,
        gen=(
            "(lambda xs: (sorted(xs, reverse=True) if random.random() < 0.4 else xs,))"
            "([random.randint(0, 3) for _ in range(random.randint(0, 6))])"
        ),
        tags=("lists", "combinatorics"),
    ),
    _fn(
        "rotate-clockwise",
        "medium",
        "rotate_clockwise",
        """
        Write a Python function `rotate_clockwise(matrix: list[list[int]]) -> list[list[int]]`
        that returns an `R x C` matrix (a list of `R` rows of length `C`, `R, C >= 1`) rotated
        90 degrees clockwise, which is a `C x R` matrix. Example:
        `rotate_clockwise([[1, 2, 3], [4, 5, 6]])` returns `[[4, 1], [5, 2], [6, 3]]`.
        """,
        """
        def rotate_clockwise(matrix):
            return [list(row) for row in zip(*matrix[::-1])]
        """,
        """
        def rotate_clockwise(matrix):
            return [list(row) for row in zip(*matrix)][::-1]
        """,
        gen=(
            "(lambda r, c: ([[random.randint(0, 9) for _ in range(c)] for _ in range(r)],))"
            "(random.randint(1, 4), random.randint(1, 4))"
        ),
        tags=("matrix",),
    ),
    _fn(
        "flatten",
        "medium",
        "flatten",
        """
        Write a Python function `flatten(nested: list) -> list[int]`. Every element of `nested`
        is either an integer or a list of the same kind, nested to any depth. Return all the
        integers in left-to-right order as one flat list.
        Example: `flatten([1, [2, [3, []]], [[4]]])` returns `[1, 2, 3, 4]`.
        """,
        """
        def flatten(nested):
            out = []
            stack = [iter(nested)]
            while stack:
                for x in stack[-1]:
                    if isinstance(x, list):
                        stack.append(iter(x))
                        break
                    out.append(x)
                else:
                    stack.pop()
            return out
        """,
        """
        def flatten(nested):
            out = []
            for x in nested:
                if isinstance(x, list):
                    out.extend(x)
                else:
                    out.append(x)
            return out
        """,
        gen=(
            "(lambda g: (g(g, 3),))(lambda g, d: [random.randint(0, 9)"
            " if d == 0 or random.random() < 0.6 else g(g, d - 1)"
            " for _ in range(random.randint(0, 4))])"
        ),
        tags=("lists", "recursion"),
    ),
    _fn(
        "group-anagrams",
        "medium",
        "group_anagrams",
        """
        Write a Python function `group_anagrams(words: list[str]) -> list[list[str]]` that groups
        words that are anagrams of each other (the same letters with the same multiplicities;
        upper and lower case are different letters). The groups appear in the order in which
        their first word appears in `words`; inside a group, words keep their input order and
        repeated words are kept. `[]` gives `[]`.
        Example: `group_anagrams(["tops", "cat", "spot", "act", "post"])` returns
        `[["tops", "spot", "post"], ["cat", "act"]]`.
        """,
        """
        def group_anagrams(words):
            groups = {}
            for w in words:
                groups.setdefault("".join(sorted(w)), []).append(w)
            return list(groups.values())
        """,
        """
        def group_anagrams(words):
            groups = {}
            for w in words:
                groups.setdefault("".join(sorted(w)), []).append(w)
            return [sorted(g) for g in groups.values()]
        """,
        unit=[
            (([],), []),
            (
                (["tops", "cat", "spot", "act", "post"],),
                [["tops", "spot", "post"], ["cat", "act"]],
            ),
            ((["abc"],), [["abc"]]),
            ((["ba", "ab", "ba"],), [["ba", "ab", "ba"]]),
            ((["Tea", "eat"],), [["Tea"], ["eat"]]),
            ((["lemon", "melon", "x", "solemn"],), [["lemon", "melon"], ["x"], ["solemn"]]),
        ],
        tags=("strings", "hashing"),
    ),
    _fn(
        "eval-rpn",
        "medium",
        "eval_rpn",
        """
        Write a Python function `eval_rpn(tokens: list[str]) -> int` that evaluates an
        expression in reverse Polish (postfix) notation. Tokens are integers (possibly negative,
        like `"-3"`) or one of the operators `+`, `-`, `*`, `/`. An operator applies to the two
        most recent values (the earlier one is the left operand). Division truncates toward
        zero, so `7 / -2` is `-3`. The input is always valid and never divides by zero.
        Example: `eval_rpn(["4", "2", "5", "*", "+"])` returns `14`.
        """,
        """
        def eval_rpn(tokens):
            stack = []
            for tok in tokens:
                if tok in ("+", "-", "*", "/"):
                    b = stack.pop()
                    a = stack.pop()
                    if tok == "+":
                        stack.append(a + b)
                    elif tok == "-":
                        stack.append(a - b)
                    elif tok == "*":
                        stack.append(a * b)
                    else:
                        q = abs(a) // abs(b)
                        stack.append(q if (a >= 0) == (b >= 0) else -q)
                else:
                    stack.append(int(tok))
            return stack[-1]
        """,
        """
        def eval_rpn(tokens):
            stack = []
            for tok in tokens:
                if tok in ("+", "-", "*", "/"):
                    b = stack.pop()
                    a = stack.pop()
                    if tok == "+":
                        stack.append(a + b)
                    elif tok == "-":
                        stack.append(a - b)
                    elif tok == "*":
                        stack.append(a * b)
                    else:
                        stack.append(a // b)
                else:
                    stack.append(int(tok))
            return stack[-1]
        """,
        unit=[
            ((["2", "3", "+"],), 5),
            ((["7", "-2", "/"],), -3),
            ((["4", "13", "5", "/", "+"],), 6),
            ((["-7", "2", "/"],), -3),
            ((["3", "4", "-", "5", "*"],), -5),
            ((["15", "7", "1", "1", "+", "-", "/", "3", "*", "2", "1", "1", "+", "+", "-"],), 5),
            ((["42"],), 42),
            ((["4", "2", "5", "*", "+"],), 14),
        ],
        tags=("stack", "parsing"),
    ),
    _fn(
        "compress-ranges",
        "medium",
        "compress_ranges",
        """
        Write a Python function `compress_ranges(nums: list[int]) -> str`. `nums` is sorted in
        strictly increasing order. Split it into maximal runs of consecutive integers; write a
        run of two or more numbers as `"first-last"` and a single number as itself; join the
        parts with commas (no spaces). Negative numbers keep their minus sign.
        Examples: `[1, 2, 3, 5, 7, 8]` -> `"1-3,5,7-8"`; `[-3, -2]` -> `"-3--2"`; `[]` -> `""`.
        """,
        """
        def compress_ranges(nums):
            parts = []
            i = 0
            while i < len(nums):
                j = i
                while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
                    j += 1
                parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
                i = j + 1
            return ",".join(parts)
        """,
        """
        def compress_ranges(nums):
            parts = []
            i = 0
            while i < len(nums):
                j = i
                while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
                    j += 1
                if j - i >= 2:
                    parts.append(f"{nums[i]}-{nums[j]}")
                else:
                    parts.extend(str(x) for x in nums[i : j + 1])
                i = j + 1
            return ",".join(parts)
        """,
        gen="(sorted(random.sample(range(-5, 25), random.randint(0, 15))),)",
        tags=("lists", "strings"),
    ),
    _fn(
        "min-coins",
        "medium",
        "min_coins",
        """
        Write a Python function `min_coins(coins: list[int], amount: int) -> int` that returns
        the smallest number of coins whose values add up to exactly `amount`, using any number
        of coins of each value in `coins` (distinct positive integers). Return `0` when
        `amount` is `0` and `-1` when the amount cannot be made. `0 <= amount <= 500`.
        Example: `min_coins([1, 3, 4], 6)` returns `2` (3 + 3).
        """,
        """
        def min_coins(coins, amount):
            best = [0] + [-1] * amount
            for total in range(1, amount + 1):
                options = [best[total - c] for c in coins if c <= total and best[total - c] >= 0]
                best[total] = min(options) + 1 if options else -1
            return best[amount]
        """,
        """
        def min_coins(coins, amount):
            count = 0
            for c in sorted(coins, reverse=True):
                count += amount // c
                amount %= c
            return count if amount == 0 else -1
        """,
        gen="(random.sample(range(1, 16), random.randint(1, 4)), random.randint(0, 60))",
        tags=("dynamic-programming",),
    ),
    _fn(
        "count-islands",
        "medium",
        "count_islands",
        """
        Write a Python function `count_islands(grid: list[str]) -> int`. `grid` is a list of
        equal-length strings made of `'#'` (land) and `'.'` (water); it may be empty. An island
        is a maximal group of land cells connected through horizontal or vertical neighbours
        (diagonal neighbours are *not* connected). Return the number of islands.
        Example: `count_islands(["#.", ".#"])` returns `2`.
        """,
        """
        def count_islands(grid):
            rows = len(grid)
            cols = len(grid[0]) if rows else 0
            seen = set()
            islands = 0
            for r in range(rows):
                for c in range(cols):
                    if grid[r][c] != "#" or (r, c) in seen:
                        continue
                    islands += 1
                    seen.add((r, c))
                    todo = [(r, c)]
                    while todo:
                        y, x = todo.pop()
                        for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                            if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == "#":
                                if (ny, nx) not in seen:
                                    seen.add((ny, nx))
                                    todo.append((ny, nx))
            return islands
        """,
        """
        def count_islands(grid):
            rows = len(grid)
            cols = len(grid[0]) if rows else 0
            seen = set()
            islands = 0
            for r in range(rows):
                for c in range(cols):
                    if grid[r][c] != "#" or (r, c) in seen:
                        continue
                    islands += 1
                    seen.add((r, c))
                    todo = [(r, c)]
                    while todo:
                        y, x = todo.pop()
                        for dy in (-1, 0, 1):
                            for dx in (-1, 0, 1):
                                ny, nx = y + dy, x + dx
                                if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == "#":
                                    if (ny, nx) not in seen:
                                        seen.add((ny, nx))
                                        todo.append((ny, nx))
            return islands
        """,
        gen=(
            '(lambda r, c: (["".join(random.choice("#..") for _ in range(c))'
            " for _ in range(r)],))(random.randint(0, 6), random.randint(1, 6))"
        ),
        tags=("grid", "graphs"),
    ),
    _fn(
        "lcs-length",
        "medium",
        "lcs_length",
        """
        Write a Python function `lcs_length(a: str, b: str) -> int` that returns the length of
        the longest common subsequence of `a` and `b`: the longest string obtainable from both
        by deleting characters (the kept characters need not be adjacent).
        Example: `lcs_length("parrot", "carton")` returns `3` (for example "art").
        """,
        """
        def lcs_length(a, b):
            prev = [0] * (len(b) + 1)
            for x in a:
                cur = [0]
                for j, y in enumerate(b):
                    cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
                prev = cur
            return prev[-1]
        """,
        """
        def lcs_length(a, b):
            best = 0
            for i in range(len(a)):
                for j in range(len(b)):
                    k = 0
                    while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
                        k += 1
                    best = max(best, k)
            return best
        """,
        gen=(
            '("".join(random.choice("abc") for _ in range(random.randint(0, 9))),'
            ' "".join(random.choice("abc") for _ in range(random.randint(0, 9))))'
        ),
        tags=("strings", "dynamic-programming"),
    ),
    _fn(
        "is-ipv4",
        "medium",
        "is_ipv4",
        """
        Write a Python function `is_ipv4(s: str) -> bool` that returns `True` when `s` is a
        dotted IPv4 address: exactly four parts separated by `.`, each part a non-empty string
        of ASCII digits only (no signs, spaces or other characters) with a value from 0 to 255
        and no leading zeros (`"0"` is allowed, `"00"` and `"07"` are not).
        Examples: `"192.168.0.1"` -> `True`; `"256.1.1.1"` -> `False`; `"01.2.3.4"` -> `False`.
        """,
        """
        def is_ipv4(s):
            parts = s.split(".")
            if len(parts) != 4:
                return False
            for part in parts:
                if not part or any(c not in "0123456789" for c in part):
                    return False
                if len(part) > 1 and part[0] == "0":
                    return False
                if int(part) > 255:
                    return False
            return True
        """,
        """
        def is_ipv4(s):
            parts = s.split(".")
            if len(parts) != 4:
                return False
            for part in parts:
                if not part or any(c not in "0123456789" for c in part):
                    return False
                if int(part) > 255:
                    return False
            return True
        """,
        unit=[
            (("192.168.0.1",), True),
            (("255.255.255.255",), True),
            (("256.1.1.1",), False),
            (("1.2.3",), False),
            (("01.2.3.4",), False),
            (("1.2.3.4.",), False),
            (("a.b.c.d",), False),
            (("0.0.0.0",), True),
            (("1..2.3",), False),
            (("-1.2.3.4",), False),
            ((" 1.2.3.4",), False),
            (("10.00.1.1",), False),
        ],
        tags=("strings", "parsing"),
    ),
    _fn(
        "top-k-frequent",
        "medium",
        "top_k_frequent",
        """
        Write a Python function `top_k_frequent(nums: list[int], k: int) -> list[int]` that
        returns the `k` distinct values of `nums` that occur most often, ordered by frequency
        (highest first); values with equal frequency are ordered from smallest to largest. When
        `nums` has fewer than `k` distinct values, return all of them in that order. `k >= 1`.
        Example: `top_k_frequent([5, 1, 5, 2, 2, 3], 2)` returns `[2, 5]`.
        """,
        """
        from collections import Counter


        def top_k_frequent(nums, k):
            counts = Counter(nums)
            return sorted(counts, key=lambda v: (-counts[v], v))[:k]
        """,
        """
        from collections import Counter


        def top_k_frequent(nums, k):
            return [v for v, _ in Counter(nums).most_common(k)]
        """,
        gen="([random.randint(0, 6) for _ in range(random.randint(0, 15))], random.randint(1, 4))",
        tags=("hashing", "sorting"),
    ),
    _io(
        "row-column-sums",
        "medium",
        """
        Write a Python program that reads a matrix from standard input. The first line holds
        `R` and `C` (`1 <= R, C <= 50`); each of the next `R` lines holds `C` integers separated
        by spaces. Print two lines: first the `R` row sums, then the `C` column sums, each line's
        numbers separated by single spaces.
        """,
        """
        import sys

        data = sys.stdin.read().split()
        r, c = int(data[0]), int(data[1])
        values = list(map(int, data[2 : 2 + r * c]))
        rows = [values[i * c : (i + 1) * c] for i in range(r)]
        print(" ".join(str(sum(row)) for row in rows))
        print(" ".join(str(sum(row[j] for row in rows)) for j in range(c)))
        """,
        """
        import sys

        data = sys.stdin.read().split()
        r, c = int(data[0]), int(data[1])
        values = list(map(int, data[2 : 2 + r * c]))
        rows = [values[i * c : (i + 1) * c] for i in range(r)]
        print(" ".join(str(sum(row)) for row in rows))
        print(" ".join(str(sum(row[j] for row in rows)) for j in range(min(r, c))))
        """,
        [
            ("2 3\n1 2 3\n4 5 6\n", "6 15\n5 7 9\n"),
            ("1 1\n-4\n", "-4\n-4\n"),
            ("3 2\n1 -1\n2 0\n0 5\n", "0 2 5\n3 4\n"),
        ],
        tags=("matrix",),
    ),
    _io(
        "ledger",
        "medium",
        """
        Write a Python program that processes a bank ledger from standard input. The first line
        holds `n` (`0 <= n <= 1000`); each of the next `n` lines is `deposit X` or `withdraw X`
        with an integer `1 <= X <= 10^6`. The balance starts at 0. A withdrawal larger than
        the current balance is rejected and leaves the balance unchanged (withdrawing exactly
        the balance is allowed). Print the final balance on the first line and the number of
        rejected withdrawals on the second.
        """,
        """
        n = int(input())
        balance = rejected = 0
        for _ in range(n):
            op, amount = input().split()
            amount = int(amount)
            if op == "deposit":
                balance += amount
            elif amount <= balance:
                balance -= amount
            else:
                rejected += 1
        print(balance)
        print(rejected)
        """,
        """
        n = int(input())
        balance = rejected = 0
        for _ in range(n):
            op, amount = input().split()
            amount = int(amount)
            if op == "deposit":
                balance += amount
            elif amount < balance:
                balance -= amount
            else:
                rejected += 1
        print(balance)
        print(rejected)
        """,
        [
            ("4\ndeposit 100\nwithdraw 30\nwithdraw 80\ndeposit 5\n", "75\n1\n"),
            ("2\ndeposit 50\nwithdraw 50\n", "0\n0\n"),
            ("1\nwithdraw 1\n", "0\n1\n"),
            ("0\n", "0\n0\n"),
        ],
        tags=("simulation",),
    ),
    _fn(
        "look-and-say",
        "medium",
        "look_and_say",
        """
        Write a Python function `look_and_say(s: str, n: int) -> str` that applies the
        "describe the digits" step `n` times to the digit string `s` (non-empty). One step
        replaces every maximal run of a single digit by the run's length followed by the digit,
        so `"1"` -> `"11"` -> `"21"` -> `"1211"`. `n >= 0`; `n = 0` returns `s` unchanged.
        Example: `look_and_say("3", 2)` returns `"1113"`.
        """,
        """
        from itertools import groupby


        def look_and_say(s, n):
            for _ in range(n):
                s = "".join(str(len(list(run))) + d for d, run in groupby(s))
            return s
        """,
        """
        from itertools import groupby


        def look_and_say(s, n):
            for _ in range(n - 1):
                s = "".join(str(len(list(run))) + d for d, run in groupby(s))
            return s
        """,
        unit=[
            (("1", 0), "1"),
            (("1", 1), "11"),
            (("1", 4), "111221"),
            (("3", 2), "1113"),
            (("1211", 1), "111221"),
            (("22", 5), "22"),
        ],
        tags=("strings",),
    ),
    _fn(
        "max-subarray-sum",
        "medium",
        "max_subarray_sum",
        """
        Write a Python function `max_subarray_sum(nums: list[int]) -> int` that returns the
        largest sum of a non-empty contiguous segment of `nums` (`nums` is non-empty). When all
        numbers are negative the answer is the largest single number.
        Example: `max_subarray_sum([2, -5, 3, -1, 4, -9])` returns `6`.
        """,
        """
        def max_subarray_sum(nums):
            best = current = nums[0]
            for x in nums[1:]:
                current = max(x, current + x)
                best = max(best, current)
            return best
        """,
        """
        def max_subarray_sum(nums):
            best = current = 0
            for x in nums:
                current = max(0, current + x)
                best = max(best, current)
            return best
        """,
        gen="([random.randint(-20, 10) for _ in range(random.randint(1, 10))],)",
        tags=("dynamic-programming", "lists"),
    ),
    _fn(
        "to-base",
        "medium",
        "to_base",
        """
        Write a Python function `to_base(n: int, base: int) -> str` that writes the integer `n`
        in the given base (`2 <= base <= 36`) using the digits `0`-`9` then lowercase `a`-`z`.
        Negative numbers get a leading `"-"`; zero is `"0"`.
        Examples: `to_base(255, 16)` returns `"ff"`; `to_base(-5, 2)` returns `"-101"`.
        """,
        """
        def to_base(n, base):
            digits = "0123456789abcdefghijklmnopqrstuvwxyz"
            if n == 0:
                return "0"
            m, out = abs(n), []
            while m:
                m, r = divmod(m, base)
                out.append(digits[r])
            return ("-" if n < 0 else "") + "".join(reversed(out))
        """,
        """
        def to_base(n, base):
            digits = "0123456789abcdefghijklmnopqrstuvwxyz"
            m, out = abs(n), []
            while m:
                m, r = divmod(m, base)
                out.append(digits[r])
            return ("-" if n < 0 else "") + "".join(reversed(out))
        """,
        gen="(random.choice([0, random.randint(-5000, 5000)]), random.randint(2, 36))",
        tags=("math", "strings"),
    ),
    _fn(
        "parse-duration",
        "medium",
        "parse_duration",
        """
        Write a Python function `parse_duration(text: str) -> int` that converts a duration such
        as `"1h30m"`, `"45s"` or `"2d3h"` into seconds. The text is a sequence of one or more
        parts `<number><unit>`, where the number is a non-negative decimal integer (possibly
        with several digits) and the unit is `d` (86400 s), `h` (3600 s), `m` (60 s) or `s`.
        Each unit appears at most once and the units appear in the order d, h, m, s. Return
        the total number of seconds, or `-1` when `text` is empty or does not follow this
        format (for example `"3m2h"`, `"1h1h"`, `"10"`, `"1x"`).
        """,
        """
        import re


        def parse_duration(text):
            match = re.fullmatch(r"(?:(\\d+)d)?(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", text)
            if not text or match is None:
                return -1
            d, h, m, s = (int(g) if g else 0 for g in match.groups())
            return d * 86400 + h * 3600 + m * 60 + s
        """,
        """
        import re


        def parse_duration(text):
            if not text:
                return -1
            scale = {"d": 86400, "h": 3600, "m": 60, "s": 1}
            return sum(int(n) * scale[u] for n, u in re.findall(r"(\\d+)([dhms])", text))
        """,
        unit=[
            (("1h30m",), 5400),
            (("45s",), 45),
            (("2d3h",), 183600),
            (("1h0m5s",), 3605),
            (("",), -1),
            (("90m",), 5400),
            (("3m2h",), -1),
            (("1x",), -1),
            (("10",), -1),
            (("1h1h",), -1),
            (("100s",), 100),
        ],
        tags=("strings", "parsing"),
    ),
    _io(
        "word-wrap",
        "medium",
        """
        Write a Python program that word-wraps text read from standard input. The first line
        holds the width `W` (`1 <= W <= 100`); the rest of the input is the text, in which a
        word is a maximal run of non-whitespace characters. Fill lines greedily: put each word
        on the current line (separated by one space) if the line's length stays at most `W`,
        otherwise start a new line with it. A word longer than `W` goes on a line of its own.
        Print the lines in order (print nothing when there are no words).
        """,
        """
        import sys

        head, _, text = sys.stdin.read().partition("\\n")
        width = int(head)
        line = ""
        for word in text.split():
            if not line:
                line = word
            elif len(line) + 1 + len(word) <= width:
                line += " " + word
            else:
                print(line)
                line = word
        if line:
            print(line)
        """,
        """
        import sys

        head, _, text = sys.stdin.read().partition("\\n")
        width = int(head)
        line = ""
        for word in text.split():
            if not line:
                line = word
            elif len(line) + 1 + len(word) < width:
                line += " " + word
            else:
                print(line)
                line = word
        if line:
            print(line)
        """,
        [
            (
                "10\nthe quick brown fox jumps over the lazy dog\n",
                "the quick\nbrown fox\njumps over\nthe lazy\ndog\n",
            ),
            ("3\nabcdef ab c\n", "abcdef\nab\nc\n"),
            ("5\n\n", ""),
            ("8\n  spaced   out\ntext here\n", "spaced\nout text\nhere\n"),
        ],
        tags=("strings",),
    ),
]

# ============================================================================================
# hard

HARD = [
    _fn(
        "edit-distance",
        "hard",
        "edit_distance",
        """
        Write a Python function `edit_distance(a: str, b: str) -> int` that returns the minimum
        number of single-character edits (insert a character, delete a character, or replace a
        character with another) needed to turn `a` into `b`.
        Example: `edit_distance("planet", "plate")` returns `2`.
        """,
        """
        def edit_distance(a, b):
            prev = list(range(len(b) + 1))
            for i, x in enumerate(a, start=1):
                cur = [i]
                for j, y in enumerate(b, start=1):
                    cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
                prev = cur
            return prev[-1]
        """,
        """
        def edit_distance(a, b):
            prev = [0] * (len(b) + 1)
            for x in a:
                cur = [0]
                for j, y in enumerate(b):
                    cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
                prev = cur
            return len(a) + len(b) - 2 * prev[-1]
        """,
        gen=(
            '("".join(random.choice("abc") for _ in range(random.randint(0, 8))),'
            ' "".join(random.choice("abc") for _ in range(random.randint(0, 8))))'
        ),
        tags=("strings", "dynamic-programming"),
    ),
    _fn(
        "longest-palindrome",
        "hard",
        "longest_palindrome",
        """
        Write a Python function `longest_palindrome(s: str) -> str` that returns the longest
        contiguous substring of `s` that reads the same forwards and backwards. When several
        have the maximum length, return the one that starts earliest. `""` gives `""`.
        Examples: `longest_palindrome("xabacdcy")` returns `"aba"`;
        `longest_palindrome("abcd")` returns `"a"`.
        """,
        """
        def longest_palindrome(s):
            best_start, best_len = 0, 0
            for center in range(2 * len(s) - 1):
                lo, hi = center // 2, (center + 1) // 2
                while lo >= 0 and hi < len(s) and s[lo] == s[hi]:
                    lo, hi = lo - 1, hi + 1
                length = hi - lo - 1
                start = lo + 1
                if length > best_len or (length == best_len and start < best_start):
                    best_start, best_len = start, length
            return s[best_start : best_start + best_len]
        """,
        """
        def longest_palindrome(s):
            best = ""
            for i in range(len(s)):
                for j in range(i + 1, len(s) + 1):
                    t = s[i:j]
                    if t == t[::-1] and len(t) >= len(best):
                        best = t
            return best
        """,
        gen='("".join(random.choice("ab") for _ in range(random.randint(0, 12))),)',
        tags=("strings",),
    ),
    _fn(
        "grid-shortest-path",
        "hard",
        "shortest_path",
        """
        Write a Python function `shortest_path(grid: list[str]) -> int`. `grid` is a non-empty
        list of equal-length, non-empty strings of `'.'` (open) and `'#'` (wall). Moving one
        step goes to the cell above, below, left or right (no diagonal moves) and must stay on
        open cells inside the grid. Return the minimum number of steps from the top-left cell
        to the bottom-right cell, or `-1` when that is impossible (including when either corner
        is a wall). A 1x1 open grid gives `0`.
        Example: `shortest_path(["..#", "#..", "#.."])` returns `4`.
        """,
        """
        from collections import deque


        def shortest_path(grid):
            rows, cols = len(grid), len(grid[0])
            if grid[0][0] == "#" or grid[-1][-1] == "#":
                return -1
            dist = {(0, 0): 0}
            queue = deque([(0, 0)])
            while queue:
                r, c = queue.popleft()
                if (r, c) == (rows - 1, cols - 1):
                    return dist[(r, c)]
                for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] == ".":
                        if (nr, nc) not in dist:
                            dist[(nr, nc)] = dist[(r, c)] + 1
                            queue.append((nr, nc))
            return -1
        """,
        """
        from collections import deque


        def shortest_path(grid):
            rows, cols = len(grid), len(grid[0])
            if grid[0][0] == "#" or grid[-1][-1] == "#":
                return -1
            dist = {(0, 0): 0}
            queue = deque([(0, 0)])
            while queue:
                r, c = queue.popleft()
                if (r, c) == (rows - 1, cols - 1):
                    return dist[(r, c)]
                for dr in (-1, 0, 1):
                    for dc in (-1, 0, 1):
                        nr, nc = r + dr, c + dc
                        if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] == ".":
                            if (nr, nc) not in dist:
                                dist[(nr, nc)] = dist[(r, c)] + 1
                                queue.append((nr, nc))
            return -1
        """,
        gen=(
            '(lambda r, c: (["".join(random.choice("...#") for _ in range(c))'
            " for _ in range(r)],))(random.randint(1, 6), random.randint(1, 6))"
        ),
        tags=("grid", "graphs", "bfs"),
    ),
    _fn(
        "smallest-topological-order",
        "hard",
        "topo_order",
        """
        Write a Python function `topo_order(n: int, edges: list[list[int]]) -> list[int]`. The
        nodes are `0 .. n-1` and each edge `[u, v]` requires `u` to come before `v`. Return the
        lexicographically smallest ordering of all `n` nodes that satisfies every edge, or `[]`
        when no ordering exists (the constraints form a cycle). Edges may repeat.
        Example: `topo_order(4, [[2, 0], [3, 1]])` returns `[2, 0, 3, 1]`;
        `topo_order(2, [[0, 1], [1, 0]])` returns `[]`.
        """,
        """
        import heapq


        def topo_order(n, edges):
            indegree = [0] * n
            out = [[] for _ in range(n)]
            for u, v in edges:
                out[u].append(v)
                indegree[v] += 1
            ready = [v for v in range(n) if indegree[v] == 0]
            heapq.heapify(ready)
            order = []
            while ready:
                u = heapq.heappop(ready)
                order.append(u)
                for v in out[u]:
                    indegree[v] -= 1
                    if indegree[v] == 0:
                        heapq.heappush(ready, v)
            return order if len(order) == n else []
        """,
        """
        from collections import deque


        def topo_order(n, edges):
            indegree = [0] * n
            out = [[] for _ in range(n)]
            for u, v in edges:
                out[u].append(v)
                indegree[v] += 1
            ready = deque(v for v in range(n) if indegree[v] == 0)
            order = []
            while ready:
                u = ready.popleft()
                order.append(u)
                for v in out[u]:
                    indegree[v] -= 1
                    if indegree[v] == 0:
                        ready.append(v)
            return order if len(order) == n else []
        """,
        gen=(
            "(lambda n: (lambda p: (n, [[p[a], p[b]] for a, b in"
            " (sorted(random.sample(range(n), 2)) for _ in range(random.randint(0, 2 * n)))]"
            " + ([[p[n - 1], p[0]]] if random.random() < 0.15 else [])))"
            "(random.sample(range(n), n)))(random.randint(2, 8))"
        ),
        tags=("graphs", "sorting"),
    ),
    _fn(
        "lis-length",
        "hard",
        "lis_length",
        """
        Write a Python function `lis_length(nums: list[int]) -> int` that returns the length of
        the longest strictly increasing subsequence of `nums` (elements in their original
        order, not necessarily adjacent). `len(nums) <= 10^5`, so aim for `O(n log n)`.
        Examples: `lis_length([3, 1, 2, 2, 5, 4])` returns `3`; `lis_length([])` returns `0`.
        """,
        """
        from bisect import bisect_left


        def lis_length(nums):
            tails = []
            for x in nums:
                i = bisect_left(tails, x)
                if i == len(tails):
                    tails.append(x)
                else:
                    tails[i] = x
            return len(tails)
        """,
        """
        from bisect import bisect_right


        def lis_length(nums):
            tails = []
            for x in nums:
                i = bisect_right(tails, x)
                if i == len(tails):
                    tails.append(x)
                else:
                    tails[i] = x
            return len(tails)
        """,
        gen="([random.randint(0, 8) for _ in range(random.randint(0, 14))],)",
        tags=("dynamic-programming", "binary-search"),
    ),
    _fn(
        "evaluate-expression",
        "hard",
        "evaluate",
        """
        Write a Python function `evaluate(expr: str) -> int` that evaluates an arithmetic
        expression made of non-negative integer literals, the binary operators `+`, `-`, `*`,
        `/`, unary minus, parentheses and spaces. `*` and `/` bind tighter than `+` and `-`;
        binary operators of equal precedence group left to right. Division is integer division
        truncating toward zero (`7 / -2` is `-3`). The expression is always valid and never
        divides by zero. Do not use `eval`.
        Examples: `evaluate("2 * (3 + 4) - -5")` returns `19`; `evaluate("8 / 3 / 2")` returns
        `1`.
        """,
        """
        def evaluate(expr):
            tokens = []
            i = 0
            while i < len(expr):
                ch = expr[i]
                if ch.isdigit():
                    j = i
                    while j < len(expr) and expr[j].isdigit():
                        j += 1
                    tokens.append(int(expr[i:j]))
                    i = j
                    continue
                if not ch.isspace():
                    tokens.append(ch)
                i += 1
            pos = 0

            def peek():
                return tokens[pos] if pos < len(tokens) else None

            def take():
                nonlocal pos
                pos += 1
                return tokens[pos - 1]

            def divide(a, b):
                q = abs(a) // abs(b)
                return q if (a >= 0) == (b >= 0) else -q

            def factor():
                tok = take()
                if tok == "-":
                    return -factor()
                if tok == "(":
                    value = expression()
                    take()
                    return value
                return tok

            def term():
                value = factor()
                while peek() in ("*", "/"):
                    op = take()
                    rhs = factor()
                    value = value * rhs if op == "*" else divide(value, rhs)
                return value

            def expression():
                value = term()
                while peek() in ("+", "-"):
                    op = take()
                    rhs = term()
                    value = value + rhs if op == "+" else value - rhs
                return value

            return expression()
        """,
        """
        def evaluate(expr):
            return eval(expr.replace("/", "//"))
        """,
        unit=[
            (("1 + 2 * 3",), 7),
            (("(1 + 2) * 3",), 9),
            (("7 / -2",), -3),
            (("-(3 - 10) / 2",), 3),
            (("2 * (3 + 4) - -5",), 19),
            (("100",), 100),
            (("8 / 3 / 2",), 1),
            (("-7 / 2 * 2",), -6),
            (("1 - 2 - 3",), -4),
            (("((2))",), 2),
            ((" 3*-2 ",), -6),
            (("10 - (4 - 9) / 2 * 3",), 16),
        ],
        tags=("parsing", "recursion"),
    ),
    _fn(
        "knapsack",
        "hard",
        "knapsack",
        """
        Write a Python function
        `knapsack(weights: list[int], values: list[int], capacity: int) -> int` for the 0/1
        knapsack problem: choose a subset of the items (item `i` has weight `weights[i] >= 1`
        and value `values[i] >= 0`; each item is used at most once) whose total weight is at
        most `capacity` (`0 <= capacity <= 1000`) and return the largest possible total value.
        Example: `knapsack([3, 4, 5], [30, 50, 60], 8)` returns `90`.
        """,
        """
        def knapsack(weights, values, capacity):
            best = [0] * (capacity + 1)
            for w, v in zip(weights, values):
                for cap in range(capacity, w - 1, -1):
                    best[cap] = max(best[cap], best[cap - w] + v)
            return best[capacity]
        """,
        """
        def knapsack(weights, values, capacity):
            items = sorted(zip(weights, values), key=lambda wv: wv[1] / wv[0], reverse=True)
            total = 0
            for w, v in items:
                if w <= capacity:
                    capacity -= w
                    total += v
            return total
        """,
        gen=(
            "(lambda ws: (ws, [w * random.randint(2, 4) + random.randint(0, 3) for w in ws],"
            " random.randint(0, sum(ws))))([random.randint(1, 10) for _ in range(random.randint(0, 7))])"
        ),
        tags=("dynamic-programming",),
    ),
    _fn(
        "shortest-distances",
        "hard",
        "shortest_distances",
        """
        Write a Python function
        `shortest_distances(n: int, edges: list[list[int]], source: int) -> list[int]` for an
        *undirected* weighted graph with nodes `0 .. n-1`. Each edge `[u, v, w]` connects `u`
        and `v` with non-negative weight `w`; there may be parallel edges and self-loops.
        Return a list whose element `i` is the length of the shortest path from `source` to
        node `i`, or `-1` when `i` is unreachable (the source itself is at distance 0).
        Example: `shortest_distances(3, [[1, 0, 4], [1, 2, 1]], 2)` returns `[5, 1, 0]`.
        """,
        """
        import heapq


        def shortest_distances(n, edges, source):
            adjacent = [[] for _ in range(n)]
            for u, v, w in edges:
                adjacent[u].append((v, w))
                adjacent[v].append((u, w))
            dist = [-1] * n
            heap = [(0, source)]
            while heap:
                d, u = heapq.heappop(heap)
                if dist[u] != -1:
                    continue
                dist[u] = d
                for v, w in adjacent[u]:
                    if dist[v] == -1:
                        heapq.heappush(heap, (d + w, v))
            return dist
        """,
        """
        import heapq


        def shortest_distances(n, edges, source):
            adjacent = [[] for _ in range(n)]
            for u, v, w in edges:
                adjacent[u].append((v, w))
            dist = [-1] * n
            heap = [(0, source)]
            while heap:
                d, u = heapq.heappop(heap)
                if dist[u] != -1:
                    continue
                dist[u] = d
                for v, w in adjacent[u]:
                    if dist[v] == -1:
                        heapq.heappush(heap, (d + w, v))
            return dist
        """,
        gen=(
            "(lambda n: (n, [[random.randrange(n), random.randrange(n), random.randint(0, 9)]"
            " for _ in range(random.randint(0, 2 * n))], random.randrange(n)))"
            "(random.randint(1, 7))"
        ),
        tags=("graphs",),
    ),
    _io(
        "max-non-overlapping",
        "hard",
        """
        Write a Python program that reads intervals from standard input and prints the largest
        number of them that can be chosen so that no two chosen intervals overlap. The first
        line holds `n` (`0 <= n <= 10^5`); each of the next `n` lines holds two integers `s e`
        with `s < e`, the half-open interval `[s, e)`. Intervals that only touch (one ends where
        the other starts) do not overlap. Print one integer.
        """,
        """
        import sys

        data = sys.stdin.read().split()
        n = int(data[0])
        intervals = sorted(
            ((int(data[1 + 2 * i]), int(data[2 + 2 * i])) for i in range(n)), key=lambda se: se[1]
        )
        count, end = 0, None
        for s, e in intervals:
            if end is None or s >= end:
                count += 1
                end = e
        print(count)
        """,
        """
        import sys

        data = sys.stdin.read().split()
        n = int(data[0])
        intervals = sorted((int(data[1 + 2 * i]), int(data[2 + 2 * i])) for i in range(n))
        count, end = 0, None
        for s, e in intervals:
            if end is None or s >= end:
                count += 1
                end = e
        print(count)
        """,
        [
            ("3\n1 4\n2 3\n3 5\n", "2\n"),
            ("0\n", "0\n"),
            ("4\n1 2\n2 3\n3 4\n1 4\n", "3\n"),
            ("5\n0 10\n1 2\n3 4\n5 6\n7 8\n", "4\n"),
        ],
        tags=("intervals", "greedy"),
    ),
    _io(
        "league-table",
        "hard",
        """
        Write a Python program that builds a football league table from standard input. The
        first line holds `m` (`1 <= m <= 1000`), the number of matches; each of the next `m`
        lines is `HOME AWAY hg ag`: two team names (single words of letters) and the goals each
        scored. A win earns 3 points, a draw 1, a loss 0. Print one line per team that appears,
        formatted `NAME POINTS GD GF` (goal difference = goals scored minus goals conceded;
        GF = goals scored), ordered by points (high to low), then goal difference (high to
        low), then goals scored (high to low), then name (ascending by plain string order).
        """,
        """
        import sys

        lines = sys.stdin.read().split("\\n")
        table = {}
        for line in lines[1 : 1 + int(lines[0])]:
            home, away, hg, ag = line.split()
            hg, ag = int(hg), int(ag)
            for team, scored, conceded in ((home, hg, ag), (away, ag, hg)):
                pts, gf, ga = table.get(team, (0, 0, 0))
                won = 3 if scored > conceded else 1 if scored == conceded else 0
                table[team] = (pts + won, gf + scored, ga + conceded)
        ranked = sorted(table.items(), key=lambda kv: (-kv[1][0], -(kv[1][1] - kv[1][2]), -kv[1][1], kv[0]))
        for name, (pts, gf, ga) in ranked:
            print(name, pts, gf - ga, gf)
        """,
        """
        import sys

        lines = sys.stdin.read().split("\\n")
        table = {}
        for line in lines[1 : 1 + int(lines[0])]:
            home, away, hg, ag = line.split()
            hg, ag = int(hg), int(ag)
            for team, scored, conceded in ((home, hg, ag), (away, ag, hg)):
                pts, gf, ga = table.get(team, (0, 0, 0))
                won = 3 if scored > conceded else 1 if scored == conceded else 0
                table[team] = (pts + won, gf + scored, ga + conceded)
        ranked = sorted(table.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
        for name, (pts, gf, ga) in ranked:
            print(name, pts, gf - ga, gf)
        """,
        [
            (
                "4\nAsh Birch 2 1\nCedar Ash 0 0\nBirch Cedar 3 0\nAsh Cedar 1 4\n",
                "Cedar 4 0 4\nAsh 4 -2 3\nBirch 3 2 4\n",
            ),
            ("2\nFox Owl 2 0\nElk Yak 6 5\n", "Fox 3 2 2\nElk 3 1 6\nYak 0 -1 5\nOwl 0 -2 0\n"),
            ("1\nZed Amy 1 1\n", "Amy 1 0 1\nZed 1 0 1\n"),
        ],
        tags=("sorting", "simulation"),
    ),
    _fn(
        "min-window",
        "hard",
        "min_window",
        """
        Write a Python function `min_window(s: str, t: str) -> str` that returns the shortest
        contiguous substring of `s` containing every character of `t` at least as many times as
        it occurs in `t` (`t` is non-empty). When several shortest substrings exist, return the
        one that starts earliest; return `""` when there is none.
        Examples: `min_window("xaybzaxb", "ab")` returns `"ayb"`;
        `min_window("aab", "aab")` returns `"aab"`; `min_window("ab", "aa")` returns `""`.
        """,
        """
        from collections import Counter


        def min_window(s, t):
            need = Counter(t)
            missing = len(t)
            best = None
            left = 0
            for right, ch in enumerate(s):
                if need[ch] > 0:
                    missing -= 1
                need[ch] -= 1
                if missing == 0:
                    while need[s[left]] < 0:
                        need[s[left]] += 1
                        left += 1
                    if best is None or right + 1 - left < best[1] - best[0]:
                        best = (left, right + 1)
                    need[s[left]] += 1
                    missing += 1
                    left += 1
            return "" if best is None else s[best[0] : best[1]]
        """,
        """
        def min_window(s, t):
            wanted = set(t)
            best = ""
            for i in range(len(s)):
                for j in range(i + 1, len(s) + 1):
                    if wanted <= set(s[i:j]) and (not best or j - i < len(best)):
                        best = s[i:j]
            return best
        """,
        gen=(
            '("".join(random.choice("abc") for _ in range(random.randint(0, 12))),'
            ' "".join(random.choice("abc") for _ in range(random.randint(1, 3))))'
        ),
        tags=("strings", "sliding-window"),
    ),
    _fn(
        "count-segmentations",
        "hard",
        "count_segmentations",
        """
        Write a Python function `count_segmentations(s: str, words: list[str]) -> int` that
        returns the number of different ways to split `s` into a sequence of pieces, each of
        which is one of `words` (words are non-empty and may be used any number of times; a
        word listed twice still counts once). The empty string has exactly one split (no
        pieces). Example: `count_segmentations("abab", ["a", "b", "ab"])` returns `4`
        (a|b|a|b, ab|a|b, a|b|ab, ab|ab).
        """,
        """
        def count_segmentations(s, words):
            vocab = set(words)
            ways = [1] + [0] * len(s)
            for end in range(1, len(s) + 1):
                ways[end] = sum(ways[start] for start in range(end) if s[start:end] in vocab)
            return ways[len(s)]
        """,
        """
        def count_segmentations(s, words):
            vocab = set(words)
            ok = [True] + [False] * len(s)
            for end in range(1, len(s) + 1):
                ok[end] = any(ok[start] and s[start:end] in vocab for start in range(end))
            return int(ok[len(s)])
        """,
        gen=(
            '("".join(random.choice("ab") for _ in range(random.randint(0, 10))),'
            ' random.sample(["a", "b", "ab", "ba", "aa", "bab", "abb"], random.randint(2, 5)))'
        ),
        tags=("strings", "dynamic-programming"),
    ),
    _fn(
        "sliding-medians",
        "hard",
        "sliding_medians",
        """
        Write a Python function `sliding_medians(nums: list[int], k: int) -> list[int]` that
        returns, for each window of `k` consecutive elements of `nums` from left to right, the
        window's lower median: the element at index `(k - 1) // 2` of the window sorted
        ascending. `1 <= k <= len(nums)`. Aim for better than sorting every window.
        Example: `sliding_medians([5, 1, 4, 2, 3], 2)` returns `[1, 1, 2, 2]`.
        """,
        """
        from bisect import bisect_left, insort


        def sliding_medians(nums, k):
            window = sorted(nums[:k])
            out = [window[(k - 1) // 2]]
            for i in range(k, len(nums)):
                window.pop(bisect_left(window, nums[i - k]))
                insort(window, nums[i])
                out.append(window[(k - 1) // 2])
            return out
        """,
        """
        from bisect import bisect_left, insort


        def sliding_medians(nums, k):
            window = sorted(nums[:k])
            out = [window[k // 2]]
            for i in range(k, len(nums)):
                window.pop(bisect_left(window, nums[i - k]))
                insort(window, nums[i])
                out.append(window[k // 2])
            return out
        """,
        gen=(
            "(lambda xs: (xs, random.randint(1, len(xs))))"
            "([random.randint(-9, 9) for _ in range(random.randint(1, 10))])"
        ),
        tags=("sorting", "sliding-window"),
    ),
]


def build_rows() -> list[dict[str, Any]]:
    """All task rows, easy first."""
    return [*EASY, *MEDIUM, *HARD]


def render() -> str:
    """The JSONL text of the bundled file."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in build_rows())


def main() -> int:
    DATA_FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {len(build_rows())} tasks to {DATA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
