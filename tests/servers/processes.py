"""Stopping the server processes the tests (and benchmarks) start, by PID."""

from __future__ import annotations

import signal
import subprocess


def stop(process: subprocess.Popen[bytes], signum: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    """Send ``signum`` (the server's own way to shut down) and wait; SIGKILL if it does not exit."""
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
