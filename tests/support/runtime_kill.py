"""Killing a runtime mid-invocation and waiting for what it leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable


def kill_and_wait_until(parent: subprocess.Popen, gone: Callable[[], bool], failure: str,
                        timeout_s: float = 5.0) -> None:
    """SIGKILL ``parent`` (a runtime), then wait until ``gone()`` holds;
    fails with ``failure`` after ``timeout_s``. Always reaps ``parent``."""
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + timeout_s
        while not gone():
            assert time.monotonic() < deadline, failure
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
