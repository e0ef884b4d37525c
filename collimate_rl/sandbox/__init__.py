"""The sandbox handle: one session over any transport, its files and its forks.

>>> from collimate_rl.sandbox import Sandbox
>>> from collimate_rl.sandbox._shell import ShellClient
>>> with Sandbox("python3", client=ShellClient()) as box:
...     box.exec("print(6 * 7)").stdout
'42\\n'
"""

from collimate_rl.sandbox._async_sandbox import AsyncSandbox
from collimate_rl.sandbox._files import DOWNLOAD_MAX_BYTES, UPLOAD_CHUNK_CHARS
from collimate_rl.sandbox._forkgroup import NODE_FORK_MAX, AsyncForkGroup, ForkGroup
from collimate_rl.sandbox._operations import WARM_FORK_MS
from collimate_rl.sandbox._result import ExecResult
from collimate_rl.sandbox._sandbox import Sandbox

__all__ = [
    "DOWNLOAD_MAX_BYTES",
    "NODE_FORK_MAX",
    "UPLOAD_CHUNK_CHARS",
    "WARM_FORK_MS",
    "AsyncForkGroup",
    "AsyncSandbox",
    "ExecResult",
    "ForkGroup",
    "Sandbox",
]
