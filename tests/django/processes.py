"""Helpers for tests that start real server and worker processes (gunicorn, Celery, RQ, db_worker)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_url_or_skip() -> str:
    """The test Redis (``SIMBA_REDIS_URL``); skips locally, fails under CI when it is down."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping()
    except redis.RedisError:
        from tests.conftest import server_missing

        server_missing("Redis")
    return REDIS_URL


def child_environ(settings: str, simba: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child process: Django settings, ``SIMBA`` as JSON, this checkout on the path."""
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "PYTHONPATH": str(ROOT),
        "SIMBA_CHILD_SIMBA": json.dumps(simba or {}),
        **extra,
    }
    environ.pop("PYTEST_CURRENT_TEST", None)  # the child is no test: it decides on autostart itself
    return environ


def console_script(name: str) -> str:
    """A console script of this environment (gunicorn, celery, rq): the name decides what a server is."""
    return str(Path(sys.executable).with_name(name))


class Output:
    """Collects a process's output lines on a thread, so that a test can wait on them."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def matches(self, pattern: str) -> list[re.Match[str]]:
        return [m for m in map(re.compile(pattern).search, list(self.lines)) if m]

    def text(self) -> str:
        return "\n".join(self.lines)


@contextmanager
def running(argv: Sequence[str], environ: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """Start ``argv`` with stdout and stderr collected; SIGTERM it (then SIGKILL) on the way out."""
    process = subprocess.Popen(
        list(argv), env=environ, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    output = Output(process.stdout)
    try:
        yield process, output
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def forget_redis_keys(url: str, *patterns: str) -> None:
    """Delete what a test left on its Redis database (lease keys of its one-off names, queue bindings)."""
    import redis

    connection = redis.Redis.from_url(url)
    try:
        for pattern in patterns:
            keys = list(connection.scan_iter(match=pattern, count=1000))
            if keys:
                connection.delete(*keys)
    finally:
        connection.close()


# -- the tiny project (tests/django/tinysite) under gunicorn ---------------------------------------

TINYSITE_SETTINGS = "tests.django.tinysite.settings"
#: How long a server or a command of the tiny project may take to start.
BOOT = 30.0


def gunicorn_argv(workers: int = 2) -> list[str]:
    bind = ["--bind", "127.0.0.1:0"]
    return [
        console_script("gunicorn"),
        "--workers",
        str(workers),
        *bind,
        "tests.django.tinysite.wsgi:application",
    ]


def listening_port(output: Output) -> str:
    from django_simba.testing import wait_until

    listening = r"Listening at: http://127\.0\.0\.1:(\d+)"
    found = wait_until(lambda: output.matches(listening), BOOT, message="gunicorn listens")
    return found[0].group(1)


def booted_workers(output: Output, workers: int = 2) -> set[int]:
    from django_simba.testing import wait_until

    def booted() -> set[int] | None:
        pids = {int(m.group(1)) for m in output.matches(r"Booting worker with pid: (\d+)")}
        return pids if len(pids) == workers else None

    return wait_until(booted, BOOT, message=f"{workers} workers booted")


def every_worker_logs(output: Output, workers: set[int], pattern: str, what: str) -> None:
    """Wait until each worker logged a line of ``pattern`` (its first group: the pid of the line)."""
    from django_simba.testing import wait_until

    wait_until(
        lambda: {int(m.group(1)) for m in output.matches(pattern)} == workers,
        BOOT,
        message=f"every worker logged {what}",
    )
