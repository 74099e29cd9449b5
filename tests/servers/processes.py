"""Stopping the server processes the tests (and benchmarks) start, by PID."""

from __future__ import annotations

import os
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


class ServerProcess:
    """A server process the tests started: paused, resumed, stopped and killed by its PID."""

    process: subprocess.Popen[bytes] | None = None
    paused = False

    @property
    def pid(self) -> int:
        assert self.process is not None, "server not started"
        return self.process.pid

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing."""
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """Terminate by PID (resuming a paused server first), killing it if it does not exit."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None and self.paused:
            os.kill(process.pid, signal.SIGCONT)
        stop(process)
        if process.stderr is not None:
            process.stderr.close()
        self.paused = False

    def kill(self) -> None:
        """SIGKILL by PID: a crash, with no chance to close anything."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)
        self.paused = False
