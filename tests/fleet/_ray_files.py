"""Ray's own files in the fleet tests: a folder of the test's, removed once Ray is quiet."""

from __future__ import annotations

import os
import shutil
import time


def remove_when_quiet(folder: str, seconds: float = 10.0) -> None:
    """Remove ``folder``, again while a stopping Ray process still writes into it."""
    deadline = time.monotonic() + seconds
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        time.sleep(0.5)
        if not os.path.exists(folder) or time.monotonic() > deadline:
            return
