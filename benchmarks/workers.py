"""Worker processes that run benchmark jobs, so every subject runs in a process of its own.

A worker is a spawned interpreter with Django set up on ``benchmarks.settings``;
the parent sends it a job (``"module:function"`` and keyword arguments) and gets
back the job's picklable result or its traceback. Workers can be killed by PID
(the take-over scenario does exactly that) and are stopped by PID at the end.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import traceback
from multiprocessing.connection import Connection
from typing import Any

SETTINGS = "benchmarks.settings"


class JobFailed(RuntimeError):
    """A job raised in its worker; the message carries the worker's traceback."""


def resolve(reference: str) -> Any:
    """``"package.module:attribute"`` -> the attribute."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def setup_django(*, force: bool = False) -> None:
    if force:
        os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    else:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
    import django

    django.setup()


def _serve(conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us; a Ctrl-C is its business
    setup_django(force=True)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        job, kwargs = message
        try:
            conn.send(("ok", resolve(job)(**kwargs)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


class Worker:
    """One spawned process running jobs one at a time."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), name="simba-bench-worker")
        self.process.start()
        child.close()
        self.busy = False

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def wait_ready(self, timeout: float = 120) -> None:
        kind, _ = self._receive(timeout)
        if kind != "ready":
            raise JobFailed(f"worker {self.pid} did not start")

    def submit(self, job: str, **kwargs: Any) -> None:
        self.conn.send((job, kwargs))
        self.busy = True

    def result(self, timeout: float) -> Any:
        kind, value = self._receive(timeout)
        self.busy = False
        if kind == "error":
            raise JobFailed(value)
        return value

    def run(self, job: str, timeout: float, **kwargs: Any) -> Any:
        self.submit(job, **kwargs)
        return self.result(timeout)

    def _receive(self, timeout: float) -> tuple[str, Any]:
        if not self.conn.poll(timeout):
            self.kill()
            raise JobFailed(f"worker {self.pid} gave no answer within {timeout:g} s (killed)")
        try:
            message: tuple[str, Any] = self.conn.recv()
        except EOFError:
            self.process.join(5)
            raise JobFailed(f"worker {self.pid} died (exit code {self.process.exitcode})") from None
        return message

    def kill(self) -> None:
        if self.process.is_alive():
            os.kill(self.pid, signal.SIGKILL)
        self.process.join(10)

    def stop(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.process.join(10)
        self.kill()
        self.conn.close()


class WorkerPool:
    """Workers started in parallel and reused between jobs; a killed worker is replaced."""

    def __init__(self) -> None:
        self.workers: list[Worker] = []

    def get(self, count: int) -> list[Worker]:
        self.workers = [worker for worker in self.workers if worker.process.is_alive()]
        fresh = [Worker() for _ in range(count - len(self.workers))]
        for worker in fresh:
            worker.wait_ready()
        self.workers.extend(fresh)
        return self.workers[:count]

    def replace(self, dead: Worker) -> Worker:
        """A new worker in place of one that died or was killed."""
        if dead in self.workers:
            self.workers.remove(dead)
        (worker,) = self.fresh(1)
        self.workers.append(worker)
        return worker

    def fresh(self, count: int) -> list[Worker]:
        """New workers, not shared with later jobs (the memory scenario measures a clean process)."""
        workers = [Worker() for _ in range(count)]
        for worker in workers:
            worker.wait_ready()
        return workers

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []
