"""django-simba under the benchmark's interfaces: through the engine, and through the SPI alone.

The engine rows are what an application gets (``engine.lock(name)``,
``engine.election(name)``); the SPI rows call the backend directly and show how
much of a cycle is the backend's and how much the engine's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django_simba.engine import Election, Engine, EngineConfig, Lock
from django_simba.spi import LeaseBackend, LockTimeout

from .peers.base import Env

#: Bounds every backend call, as the renew interval does by default.
CALL_TIMEOUT = 5.0
#: ZooKeeper nodes of the benchmark live apart from the tests'.
ZOOKEEPER_ROOT = "/simba-bench"
#: Threads that acquire many leases at once. SQLite gets one: it has a single writer, so more
#: threads would only queue for the process's turn.
BULK_THREADS = {"sqlite": 1}


def bulk_threads(family: str) -> int:
    return BULK_THREADS.get(family, 8)


_memory_backend: LeaseBackend | None = None
_memory_lock = threading.Lock()


def build_backend(
    family: str, env: Env, *, timeout: float = CALL_TIMEOUT, pool: int | None = None
) -> LeaseBackend:
    """A backend of ``family`` on the benchmark's servers (memory: one shared per process).

    ``pool``: the database backends' ``max_connections`` (their default otherwise).
    """
    global _memory_backend
    if family == "memory":
        from django_simba.backends.memory.backend import MemoryBackend

        with _memory_lock:
            if _memory_backend is None:
                _memory_backend = MemoryBackend(timeout=timeout)
            return _memory_backend
    if family == "redis":
        from django_simba.backends.redis import RedisBackend

        return RedisBackend({"url": env["redis_url"]}, timeout=timeout)
    if family in ("postgresql", "mysql", "sqlite"):
        from django_simba.backends.database import AnyDatabaseBackend

        options: dict[str, object] = {"alias": family}
        if pool is not None:
            options["max_connections"] = pool
        backend: LeaseBackend = AnyDatabaseBackend.build(options, timeout=timeout)
        return backend
    if family == "zookeeper":
        from django_simba.backends.zookeeper import ZookeeperBackend

        return ZookeeperBackend({"hosts": env["zk_hosts"], "root": ZOOKEEPER_ROOT}, timeout=timeout)
    raise ValueError(f"unknown backend family {family!r}")


def engine_config(ttl: float) -> EngineConfig:
    """The lease is the subject's TTL; renewed three times per lease, as the defaults (15 s / 5 s)."""
    return EngineConfig(lease_duration=ttl, renew_interval=ttl / 3, metadata="benchmark")


def start_engine(family: str, env: Env, ttl: float, *, pool: int | None = None) -> Engine:
    engine = Engine(build_backend(family, env, pool=pool), engine_config(ttl))
    engine.wait_for_session(30)
    return engine


class SimbaLock:
    """``engine.lock(name)``: acquire with a timeout, release."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.lock: Lock = engine.lock(name)

    def acquire(self, timeout: float | None) -> bool:
        try:
            self.lock.acquire(timeout)
        except LockTimeout:
            return False
        return True

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.engine.close()


class SpiLock:
    """The backend's own ``acquire`` / ``release`` on one session: no engine in between.

    A daemon thread keeps the session alive every third of its lease, as the engine would.
    """

    def __init__(self, backend: LeaseBackend, name: str, ttl: float) -> None:
        self.backend = backend
        self.name = name
        self.session_id = backend.open_session(ttl, "benchmark").session_id
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep_alive, args=(ttl,), daemon=True)
        self._keeper.start()

    def _keep_alive(self, ttl: float) -> None:
        while not self._stop.wait(ttl / 3):
            self.backend.keep_alive(self.session_id, ttl)

    def acquire(self, timeout: float | None) -> bool:
        if timeout != 0:
            raise NotImplementedError("the SPI has no blocking acquire; only the uncontended cycle uses it")
        return self.backend.acquire(self.session_id, self.name) is not None

    def release(self) -> None:
        self.backend.release(self.session_id, self.name)

    def close(self) -> None:
        self._stop.set()
        self._keeper.join(10)
        self.backend.close_session(self.session_id)
        self.backend.close()


class SimbaCandidate:
    """``engine.election(name, on_elected=...)``; standing down closes the candidacy."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self.election: Election | None = None

    def start(self, on_elected: Callable[[], None]) -> None:
        self.election = self.engine.election(self.name, on_elected=lambda term: on_elected())

    def stand_down(self) -> None:
        if self.election is not None:
            self.election.close()

    def close(self) -> None:
        self.engine.close()


class SpiHolder:
    """One backend session holding many leases; a keep-alive is one ``keep_alive`` call."""

    def __init__(self, backend: LeaseBackend, ttl: float) -> None:
        self.backend = backend
        self.ttl = ttl
        self.threads = bulk_threads(backend.vendor)
        self.session_id = backend.open_session(ttl, "benchmark").session_id
        self.held = 0

    def hold(self, names: list[str]) -> None:
        with ThreadPoolExecutor(self.threads) as pool:
            grants = list(pool.map(lambda name: self.backend.acquire(self.session_id, name), names))
        if any(grant is None for grant in grants):
            raise RuntimeError("a fresh lease name was not free")
        self.held += len(names)

    def keep_alive(self) -> None:
        renewal = self.backend.keep_alive(self.session_id, self.ttl)
        if len(renewal.owned) != self.held:
            raise RuntimeError(f"keep-alive listed {len(renewal.owned)} leases, {self.held} are held")

    def close(self) -> None:
        self.backend.close_session(self.session_id)
        self.backend.close()


def lock_factory(family: str) -> Callable[[Env, str, float], SimbaLock]:
    return lambda env, name, ttl: SimbaLock(start_engine(family, env, ttl), name)


def spi_lock_factory(family: str) -> Callable[[Env, str, float], SpiLock]:
    return lambda env, name, ttl: SpiLock(build_backend(family, env), name, ttl)


def candidate_factory(family: str) -> Callable[[Env, str, float], SimbaCandidate]:
    return lambda env, name, ttl: SimbaCandidate(start_engine(family, env, ttl), name)


def holder_factory(family: str) -> Callable[[Env, float], SpiHolder]:
    return lambda env, ttl: SpiHolder(build_backend(family, env), ttl)
