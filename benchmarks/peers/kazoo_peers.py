"""kazoo's recipes: the Lock (sequential ephemeral nodes, FIFO) and the Election built on it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from .base import Env


def client(env: Env, ttl: float) -> Any:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=env["zk_hosts"], timeout=ttl)
    zk.start(timeout=10)
    return zk


class KazooLock:
    def __init__(self, env: Env, name: str, ttl: float) -> None:
        self.zk = client(env, ttl)
        self.lock = self.zk.Lock(f"/bench-kazoo/locks/{name}", uuid.uuid4().hex)

    def acquire(self, timeout: float | None) -> bool:
        if timeout == 0:
            return bool(self.lock.acquire(blocking=False))
        return bool(self.lock.acquire(blocking=True, timeout=timeout))

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


class KazooCandidate:
    """``Election.run(leader_function)``: leads while the function runs; returning stands down."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        self.zk = client(env, ttl)
        self.election = self.zk.Election(f"/bench-kazoo/elections/{name}", uuid.uuid4().hex)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_elected: Callable[[], None]) -> None:
        def lead() -> None:
            on_elected()
            self._done.wait()

        self._thread = threading.Thread(target=lambda: self.election.run(lead), daemon=True)
        self._thread.start()

    def stand_down(self) -> None:
        self._done.set()

    def close(self) -> None:
        self._done.set()
        self.election.cancel()
        if self._thread is not None:
            self._thread.join(5)  # the recipe deletes its node on the way out: the client must still run
        self.zk.stop()
        self.zk.close()


def make_lock(env: Env, name: str, ttl: float) -> KazooLock:
    return KazooLock(env, name, ttl)


def make_candidate(env: Env, name: str, ttl: float) -> KazooCandidate:
    return KazooCandidate(env, name, ttl)
