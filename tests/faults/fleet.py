"""The worker processes of one test: started, signalled, read and stopped by PID.

A :class:`Fleet` spawns ``worker.py`` processes that contend for one lock; the
test reads their JSON-lines logs while they run (who holds the lock now, what
each one wrote) and stops them at the end, telling apart a clean exit, a crash
(non-zero exit, traceback, ``crash`` event) and a hang (no exit after SIGTERM).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from django_simba.testing import wait_until

WORKER = Path(__file__).with_name("worker.py")
REPO = WORKER.parents[2]
#: A worker must exit this long after SIGTERM, or it counts as hung.
STOP_TIMEOUT = 10.0

Event = dict[str, Any]
T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], timeout: float, message: str) -> T:
    """``wait_until`` for a condition that returns the thing waited for, or None."""
    found = wait_until(condition, timeout, interval=0.005, message=message)
    assert found is not None
    return found


@dataclass
class WorkerProcess:
    id: str
    config_path: Path
    log_path: Path
    stderr_path: Path
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    killed: bool = False  # SIGKILLed on purpose by the test
    hung: bool = False
    terminated: bool = False  # SIGTERM sent (once: a second one could land during interpreter exit)
    stop_timeout: float = STOP_TIMEOUT
    _stderr: Any = None
    _offset: int = 0
    _events: list[Event] = field(default_factory=list)

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self) -> None:
        self._stderr = self.stderr_path.open("wb")
        env = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(self.config_path), "run"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._stderr,
            stderr=subprocess.STDOUT,
        )

    def events(self) -> list[Event]:
        """Every complete line logged so far (read incrementally)."""
        if self.log_path.exists():
            with self.log_path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
            complete = data[: data.rfind(b"\n") + 1]
            self._offset += len(complete)
            self._events.extend(json.loads(line) for line in complete.splitlines() if line.strip())
        return self._events

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        assert self.process is not None and self.process.poll() is None, f"{self.id} is not running"
        os.kill(self.process.pid, signum)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.killed = True
        assert self.process is not None
        self.process.wait(STOP_TIMEOUT)

    def terminate(self) -> None:
        if self.paused:
            self.resume()
        if not self.terminated and self.alive():
            self.terminated = True
            self.signal(signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM and wait; a worker that does not exit dumps its stacks and is killed (a hang)."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            self.terminate()
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.hung = True
                process.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack to stderr
                with contextlib.suppress(AssertionError):  # a worker too stuck to dump is killed all the same
                    wait_until(lambda: "most recent call first" in self.stderr(), 2, message="a stack dump")
                process.kill()
                process.wait(STOP_TIMEOUT)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def problems(self) -> list[str]:
        """Why this worker counts as crashed or hung (empty when it ended cleanly)."""
        found = []
        if self.hung:
            found.append(f"{self.id} hung: no exit within {self.stop_timeout} s of SIGTERM")
        code = None if self.process is None else self.process.returncode
        if not self.killed and code != 0:
            found.append(f"{self.id} exited with {code}")
        text = self.stderr()
        if "Traceback" in text or "Fatal Python error" in text:
            found.append(f"{self.id} wrote a traceback to stderr")
        elif "most recent call first" in text:
            found.append(f"{self.id} stalled: its stacks were dumped (watchdog or SIGUSR1)")
        crashes = [e for e in self.events() if e["e"] == "crash"]
        if crashes:
            found.append(f"{self.id} crashed: {crashes}")
        if not self.killed and not any(e["e"] == "stopped" for e in self.events()):
            found.append(f"{self.id} never logged a clean stop")
        return found


class Fleet:
    """``count`` workers contending for ``config['lock']``, each with a config file of its own."""

    def __init__(self, directory: Path, config: dict[str, Any], count: int = 3) -> None:
        self.directory = directory
        self.config = config
        self.workers: list[WorkerProcess] = []
        for index in range(1, count + 1):
            worker_id = f"w{index}"
            own = {
                **config,
                "worker": worker_id,
                "log": str(directory / f"{worker_id}.jsonl"),
                "seed": zlib.crc32(f"{config['lock']}/{index}".encode()),
            }
            path = directory / f"{worker_id}.json"
            path.write_text(json.dumps(own))
            self.workers.append(
                WorkerProcess(
                    worker_id, path, directory / f"{worker_id}.jsonl", directory / f"{worker_id}.err"
                )
            )

    def __iter__(self) -> Iterator[WorkerProcess]:
        return iter(self.workers)

    def start(self, timeout: float = 30.0) -> None:
        for worker in self.workers:
            worker.start()
        wait_until(
            lambda: all(any(e["e"] == "ready" for e in w.events()) or not w.alive() for w in self.workers),
            timeout,
            message="every worker opened a session",
        )
        dead = [w.id for w in self.workers if not w.alive()]
        assert not dead, f"workers {dead} exited at start: {[w.stderr()[-2000:] for w in self.workers]}"

    def events(self) -> list[Event]:
        """Every worker's events so far, in time order."""
        merged = [event for worker in self.workers for event in worker.events()]
        return sorted(merged, key=lambda event: event["t"])

    def worker(self, worker_id: str) -> WorkerProcess:
        return next(w for w in self.workers if w.id == worker_id)

    def holding(self) -> dict[str, Event]:
        """Workers that hold the lock by their own log: worker id -> its ``acquired`` event."""
        holders: dict[str, Event] = {}
        for worker in self.workers:
            current: Event | None = None
            for event in worker.events():
                if event["e"] == "acquired":
                    current = event
                elif event["e"] in ("released", "lost") or (event["e"] == "write" and event["late"]):
                    current = None
            if current is not None and worker.alive() and not worker.paused:
                holders[worker.id] = current
        return holders

    def fresh_holder(self, ahead: float = 0.2, timeout: float = 15.0) -> tuple[WorkerProcess, Event]:
        """Wait for a holder with ``ahead`` seconds of its hold left, so a fault injected now hits it.

        The time left is judged after the logs were read (reading them can take a while on a busy
        machine), from the end of the hold that the worker's ``acquired`` line gives.
        """

        def found() -> tuple[WorkerProcess, Event] | None:
            holders = self.holding()
            now = time.monotonic()
            for worker_id, event in holders.items():
                if event["until"] - now >= ahead:
                    return self.worker(worker_id), event
            return None

        return wait_for(found, timeout, "a worker with its hold ahead")

    def acquired_after(self, moment: float, *, besides: str | None = None) -> list[Event]:
        """``acquired`` events after ``moment`` (by workers other than ``besides``), in time order."""
        return [e for e in self.events() if e["e"] == "acquired" and e["at"] > moment and e["w"] != besides]

    def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.stop()

    def problems(self) -> list[str]:
        return [problem for worker in self.workers for problem in worker.problems()]
