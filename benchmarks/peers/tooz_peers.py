"""tooz (9.x) through its public coordinator API: locks on every driver, elections on Redis and ZooKeeper.

Each client is a coordinator of its own with a unique member id, as a separate
process would have. Blocking acquires use each driver's default way of waiting
(Redis: redis-py's 0.1 s polling; PostgreSQL: ``pg_advisory_lock``; MySQL:
``GET_LOCK(name, 0)`` retried with 1 s sleeps; ZooKeeper: kazoo's Lock recipe).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .base import Env, LockCandidate

#: How often candidates run tooz's watchers (tooz elections are driven by the caller).
WATCHER_INTERVAL = 0.05


def coordinator(url: str, *, heart: bool = False) -> Any:
    from tooz import coordination

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the PostgreSQL driver is deprecated and says so
        coord = coordination.get_coordinator(url, uuid.uuid4().hex.encode())
    coord.start(start_heart=heart)
    return coord


def url_for(driver: str, env: Env, ttl: float) -> str:
    seconds = max(1, round(ttl))  # tooz reads its timeouts as whole seconds
    if driver == "redis":
        r = env["redis"]
        return f"redis://{r['host']}:{r['port']}?db={r['db']}&lock_timeout={seconds}&membership_timeout={seconds}"
    if driver == "postgresql":
        pg = env["pg"]
        return f"postgresql://{pg['user']}@{pg['host']}:{pg['port']}/{pg['dbname']}"
    if driver == "mysql":
        my = env["mysql"]
        return f"mysql://{my['user']}@{my['host']}:{my['port']}/{my['database']}"
    if driver == "zookeeper":
        return f"zookeeper://{env['zk_hosts']}?timeout={seconds}"
    raise ValueError(driver)


class ToozLock:
    def __init__(self, url: str, name: str) -> None:
        self.coord = coordinator(url)
        self.lock = self.coord.get_lock(name.encode())

    def acquire(self, timeout: float | None) -> bool:
        if timeout == 0:
            return bool(self.lock.acquire(blocking=False))
        return bool(self.lock.acquire(blocking=True if timeout is None else timeout))

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.coord.stop()


class ToozCandidate:
    """tooz's group leadership: join a group, watch being elected, run the watchers every 50 ms."""

    def __init__(self, url: str, name: str, driver: str) -> None:
        self.coord = coordinator(url, heart=True)
        self.group = name.encode()
        self.driver = driver
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_elected: Callable[[], None]) -> None:
        from tooz import coordination

        with contextlib.suppress(coordination.GroupAlreadyExist):
            self.coord.create_group(self.group).get()
        self.coord.join_group(self.group).get()
        self.coord.watch_elected_as_leader(self.group, lambda event: on_elected())
        self._thread = threading.Thread(target=self._watch, name="bench-tooz-watchers", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(WATCHER_INTERVAL):
            self.coord.run_watchers()

    def stand_down(self) -> None:
        # Then stop, as the peer baselines did: a ZooKeeper candidate that only stands down runs
        # for leader again at its next watcher run and can win again. tooz's Redis driver cannot
        # stand down at all; stopping releases the leader lock.
        self._stop.set()
        if self.driver == "zookeeper":
            self.coord.stand_down_group_leader(self.group)
        self.coord.stop()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self.coord.is_started:
            self.coord.stop()


class ToozHolder:
    """One coordinator holding many locks; a keep-alive is one ``heartbeat()``."""

    def __init__(self, url: str) -> None:
        self.coord = coordinator(url)
        self.locks: list[Any] = []

    def hold(self, names: list[str]) -> None:
        locks = [self.coord.get_lock(name.encode()) for name in names]
        with ThreadPoolExecutor(8) as pool:
            if not all(pool.map(lambda lock: lock.acquire(blocking=False), locks)):
                raise RuntimeError("a fresh lock name was not free")
        self.locks.extend(locks)

    def keep_alive(self) -> None:
        self.coord.heartbeat()

    def close(self) -> None:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda lock: lock.release(), self.locks))
        self.coord.stop()


def make_lock(driver: str) -> Callable[[Env, str, float], ToozLock]:
    return lambda env, name, ttl: ToozLock(url_for(driver, env, ttl), name)


make_redis_lock = make_lock("redis")
make_postgresql_lock = make_lock("postgresql")
make_mysql_lock = make_lock("mysql")
make_zookeeper_lock = make_lock("zookeeper")


def make_redis_candidate(env: Env, name: str, ttl: float) -> ToozCandidate:
    return ToozCandidate(url_for("redis", env, ttl), name, "redis")


def make_zookeeper_candidate(env: Env, name: str, ttl: float) -> ToozCandidate:
    return ToozCandidate(url_for("zookeeper", env, ttl), name, "zookeeper")


def make_redis_holder(env: Env, ttl: float) -> ToozHolder:
    return ToozHolder(url_for("redis", env, ttl))


def make_zookeeper_holder(env: Env, ttl: float) -> ToozHolder:
    return ToozHolder(url_for("zookeeper", env, ttl))


def make_mysql_candidate(env: Env, name: str, ttl: float) -> LockCandidate:
    return LockCandidate(ToozLock(url_for("mysql", env, ttl), name))
