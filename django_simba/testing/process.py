"""Another real process on the test's backend, driven by the test (the ``simba_process`` fixture).

The child is a fresh interpreter with the test's settings module, ``SIMBA`` and database
names (its test databases, as the test process sees them now), so it contends for the same
names through the same backend, with a session of its own. The test sends it one command at
a time over a pipe and waits for the answer: ``hold``, ``release``, ``lead``, ``resign``,
``join``, ``leave``; ``kill`` ends it with SIGKILL, as a crash would.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import IO, Any

#: How long the child may take to start (Django set up) and to answer one command.
START_TIMEOUT = 60.0
COMMAND_TIMEOUT = 30.0


class OtherProcessError(AssertionError):
    """The other process could not start, did not answer, or its command failed."""


def child_config() -> dict[str, Any]:
    """What the child needs to be on the test's backend: settings module, SIMBA, database names."""
    from django.conf import settings
    from django.db import connections

    from ..backends.database.sqlite import sqlite_identity
    from ..conf import get_settings

    simba = get_settings()
    if simba.backend_alias == "memory":
        raise OtherProcessError(
            "simba_process needs a backend other processes can reach: the memory backend lives in"
            " one process (use the database backend, Redis or ZooKeeper in this test)"
        )
    databases = {alias: str(connections.settings[alias]["NAME"]) for alias in connections.settings}
    if simba.backend_alias == "database":
        alias = simba.options.get("alias", "default")
        database = connections.settings[alias]
        name = str(database["NAME"])
        in_memory = sqlite_identity(name) is None or "mode=memory" in name
        if database["ENGINE"].endswith("sqlite3") and in_memory:
            raise OtherProcessError(
                f"simba_process needs the SQLite database of {alias!r} in a file, not in memory:"
                f" set DATABASES[{alias!r}]['TEST']['NAME'] to a file name"
            )
    raw = getattr(settings, "SIMBA", {})
    try:
        json.dumps(raw)
    except TypeError as error:
        raise OtherProcessError(f"simba_process passes SIMBA to the child as JSON: {error}") from error
    return {"settings_module": settings.SETTINGS_MODULE, "simba": raw, "databases": databases}


class OtherProcess:
    """The test's side: one child process and its command pipe."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        self.child = child
        self.pid = child.pid
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(child.stdout,), daemon=True)
        self._reader.start()

    @classmethod
    def start(cls) -> OtherProcess:
        config = child_config()
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.curdir for p in sys.path)}
        child = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environ,
        )
        other = cls(child)
        try:
            other._send(config)
            other._answer(START_TIMEOUT)
        except BaseException:
            other.kill()
            raise
        return other

    # -- commands -----------------------------------------------------------------------

    def hold(self, name: str, timeout: float | None = 10.0) -> int:
        """Take the lock ``name`` (waiting up to ``timeout``) and keep it; its token."""
        return int(self._command("hold", name=name, timeout=timeout))

    def release(self, name: str) -> None:
        self._command("release", name=name)

    def lead(self, name: str, timeout: float = 10.0) -> int:
        """Stand in the election ``name`` and wait to be elected; the term's token."""
        return int(self._command("lead", name=name, timeout=timeout))

    def resign(self, name: str) -> None:
        self._command("resign", name=name)

    def join(self, group: str) -> None:
        self._command("join", name=group)

    def leave(self, group: str) -> None:
        self._command("leave", name=group)

    def session_id(self) -> str:
        return str(self._command("session"))

    def kill(self) -> None:
        """SIGKILL: nothing is released; what it held is free once its session expires."""
        if self.child.poll() is None:
            os.kill(self.child.pid, signal.SIGKILL)
        self.child.wait(COMMAND_TIMEOUT)

    def stop(self) -> None:
        """Close its engine (releasing what it holds) and let it exit; kill it if it does not."""
        if self.child.poll() is None:
            try:
                self._command("stop")
                self.child.wait(COMMAND_TIMEOUT)
            except (OtherProcessError, subprocess.TimeoutExpired, OSError):
                self.kill()
        if self.child.stdin is not None:
            self.child.stdin.close()

    # -- the pipe -----------------------------------------------------------------------

    def _command(self, op: str, **arguments: Any) -> Any:
        self._send({"op": op, **arguments})
        return self._answer(COMMAND_TIMEOUT + float(arguments.get("timeout") or 0))

    def _send(self, message: dict[str, Any]) -> None:
        assert self.child.stdin is not None
        try:
            self.child.stdin.write(json.dumps(message) + "\n")
            self.child.stdin.flush()
        except OSError as error:
            raise OtherProcessError(f"the other process (pid {self.pid}) is gone: {error}") from error

    def _answer(self, timeout: float) -> Any:
        try:
            reply = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise OtherProcessError(
                f"the other process (pid {self.pid}) did not answer within {timeout} s"
            ) from None
        if reply is None:
            raise OtherProcessError(f"the other process (pid {self.pid}) exited ({self.child.poll()})")
        if "error" in reply:
            raise OtherProcessError(f"in the other process: {reply['error']}")
        return reply.get("value")

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self._replies.put(json.loads(line))
        self._replies.put(None)


# -- the child's side -------------------------------------------------------------------------


class _Child:
    """Runs the commands of the test with the public API, on an engine of its own."""

    def __init__(self) -> None:
        self.locks: dict[str, Any] = {}
        self.elections: dict[str, Any] = {}
        self.groups: dict[str, Any] = {}

    def run(self, op: str, name: str = "", timeout: float | None = None) -> Any:
        import django_simba
        from django_simba import registry

        if op == "hold":
            held = django_simba.lock(name, timeout=timeout)
            self.locks[name] = held
            return held.acquire().token
        if op == "release":
            self.locks.pop(name).release()
            return None
        if op == "lead":
            candidate = self.elections[name] = django_simba.election(name)
            from .waiting import wait_until

            wait_until(lambda: candidate.is_leader, timeout or COMMAND_TIMEOUT, message=f"leading {name!r}")
            term = candidate.term
            if term is None:
                raise RuntimeError(f"elected for {name!r}, then revoked at once")
            return term.token
        if op == "resign":
            self.elections.pop(name).close()
            return None
        if op == "join":
            self.groups[name] = django_simba.group(name)
            self.groups[name].join()
            return None
        if op == "leave":
            self.groups.pop(name).leave()
            return None
        if op == "session":
            return registry.get_engine().wait_for_session(COMMAND_TIMEOUT)
        if op == "stop":
            registry.reset()
            return None
        raise ValueError(f"unknown command {op!r}")


def _serve() -> None:
    replies = sys.stdout
    sys.stdout = sys.stderr  # anything the code prints must not mix with the replies
    config = json.loads(sys.stdin.readline())
    os.environ["DJANGO_SETTINGS_MODULE"] = config["settings_module"]
    from django.conf import settings

    for alias, name in config["databases"].items():
        settings.DATABASES[alias]["NAME"] = name
    settings.SIMBA = config["simba"]
    import django

    django.setup()
    replies.write(json.dumps({"value": os.getpid()}) + "\n")
    replies.flush()
    child = _Child()
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        try:
            reply = {"value": child.run(op, **command)}
        except Exception as error:
            reply = {"error": f"{type(error).__name__}: {error}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
        if op == "stop":
            return


if __name__ == "__main__":
    _serve()
