"""Worker process for the skyrl-gym baseline: grade rollouts with its own ``lcb`` env.

Run as ``python -m collimate_rl.bench._lcb_worker <request.json> <result.json>``. The request
is ``{"cases": [[completion, tests], ...], "workers": N}``; the result
``{"seconds": wall time of the timed batch, "rewards": [...]}``. A separate process so that
skyrl-gym's per-grade forks copy a lean interpreter (with numpy and pandas warm, as its
grader's preamble imports both), not the benchmark's.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    with open(request_path) as fh:
        request = json.load(fh)
    import numpy  # noqa: F401  (warm, like a trainer process)
    import pandas  # noqa: F401
    from skyrl_gym.envs.lcb.env import LCBEnv

    def grade(case: list[Any]) -> float:
        completion, tests = case
        env = LCBEnv(env_config={}, extras={"reward_spec": {"ground_truth": json.dumps(tests)}})
        return float(env.step(completion)["reward"])

    cases = request["cases"]
    grade(cases[0])  # warm-up: first-use imports
    t0 = time.perf_counter()
    with ThreadPoolExecutor(int(request["workers"])) as pool:
        rewards = list(pool.map(grade, cases))
    seconds = time.perf_counter() - t0
    with open(result_path, "w") as fh:
        json.dump({"seconds": seconds, "rewards": rewards}, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
