"""A tiny local checker for the task data's self-tests (NOT the product's grading path).

It runs a solution against a task's tests in a fresh ``python -I`` subprocess, without a
sandbox: it exists only to verify that bundled references pass and wrong solutions fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from collimate_envs.tasks import (
    AssertTests,
    FunctionCallTests,
    IOTests,
    PropertyTests,
    Task,
    UnitTests,
)

TIMEOUT_S = 20.0

_HARNESS = r"""
import copy, json, random, sys

def norm(x):
    if isinstance(x, (list, tuple)):
        return [norm(v) for v in x]
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    return x

def load(code, name):
    ns = {"__name__": "__solution__"}
    exec(compile(code, "<solution>", "exec"), ns)
    if name is None:
        return None, ns
    if name not in ns and "Solution" in ns:
        return getattr(ns["Solution"](), name), ns
    return ns[name], ns

def call(fn, args):
    try:
        return True, norm(fn(*copy.deepcopy(args)))
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"

req = json.loads(sys.stdin.read())
kind, entry = req["kind"], req["entry"]
failures = []
if kind in ("unit", "function_call"):
    fn, _ = load(req["solution"], entry)
    for i, (args, expected) in enumerate(req["cases"]):
        ok, got = call(fn, args)
        accepted = [norm(expected)]
        if req.get("accept_wrapped") and isinstance(expected, list) and len(expected) == 1:
            accepted.append(norm(expected[0]))
        if not ok or got not in accepted:
            failures.append(f"case {i}: args={args!r} expected={expected!r} got={got!r}")
elif kind == "property":
    ref, _ = load(req["reference"], entry)
    fn, _ = load(req["solution"], entry)
    rng = random.Random(req["seed"])
    for i in range(req["k"]):
        args = eval(req["generator"], {"random": rng})
        ok_ref, expected = call(ref, args)
        if not ok_ref:
            raise RuntimeError(f"reference failed on {args!r}: {expected}")
        ok, got = call(fn, args)
        if not ok or got != expected:
            failures.append(f"input {i}: args={args!r} expected={expected!r} got={got!r}")
elif kind == "assert":
    _, ns = load(req["solution"], None)
    try:
        exec(compile(req["script"], "<tests>", "exec"), ns)
    except Exception as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
else:
    raise SystemExit(f"unknown kind {kind}")
print(json.dumps({"failures": failures}))
"""


@dataclass(frozen=True)
class Outcome:
    passed: bool
    failures: tuple[str, ...]


def _normalise_output(text: str) -> list[str]:
    lines = [line.strip() for line in text.strip("\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _run_io(solution: str, tests: IOTests) -> Outcome:
    failures = []
    for i, (stdin, expected) in enumerate(tests.cases):
        proc = subprocess.run(
            [sys.executable, "-I", "-c", solution],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0:
            failures.append(f"case {i}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        elif _normalise_output(proc.stdout) != _normalise_output(expected):
            failures.append(f"case {i}: expected {expected!r}, got {proc.stdout!r}")
    return Outcome(not failures, tuple(failures))


def run(task: Task, solution: str) -> Outcome:
    """Run ``solution`` against ``task``'s tests; infrastructure problems raise."""
    spec = task.tests
    if isinstance(spec, IOTests):
        return _run_io(solution, spec)
    request: dict[str, Any] = {"kind": spec.kind, "entry": task.entry_point, "solution": solution}
    if isinstance(spec, (UnitTests, FunctionCallTests)):
        request["cases"] = [[list(args), expected] for args, expected in spec.cases]
        request["accept_wrapped"] = getattr(spec, "accept_wrapped", False)
        if isinstance(spec, FunctionCallTests):
            request["entry"] = spec.fn_name
    elif isinstance(spec, PropertyTests):
        request.update(reference=spec.reference, generator=spec.generator, k=spec.k, seed=spec.seed)
    elif isinstance(spec, AssertTests):
        assert task.entry_point is not None
        request["script"] = spec.script(task.entry_point)
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _HARNESS],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        # The solution crashed at import time (a failure) or the harness broke (raise).
        if "<solution>" in proc.stderr and "RuntimeError: reference" not in proc.stderr:
            return Outcome(False, (proc.stderr.strip()[-500:],))
        raise RuntimeError(f"checker harness failed: {proc.stderr.strip()[-2000:]}")
    failures = tuple(json.loads(lines[-1])["failures"])
    return Outcome(not failures, failures)


def generate_inputs(spec: PropertyTests, seed: int | None = None) -> list[Any]:
    """Evaluate a property generator ``k`` times in-process (generators are trusted data)."""
    import random

    rng = random.Random(spec.seed if seed is None else seed)
    return [eval(spec.generator, {"random": rng}) for _ in range(spec.k)]
