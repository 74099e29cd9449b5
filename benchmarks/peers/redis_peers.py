"""Redis lock libraries: python-redis-lock and pottery's Redlock on a single master."""

from __future__ import annotations

import uuid
from typing import Any

from .base import Env, LockCandidate


class PythonRedisLock:
    """python-redis-lock with an expiry (its default is none: a dead holder's lock never frees)."""

    def __init__(self, env: Env, name: str, ttl: float) -> None:
        import redis
        import redis_lock  # type: ignore[import-untyped]

        self.client = redis.Redis.from_url(env["redis_url"])
        self.lock = redis_lock.Lock(
            self.client, f"bench:{name}", expire=max(1, round(ttl)), id=uuid.uuid4().hex
        )

    def acquire(self, timeout: float | None) -> bool:
        if timeout == 0:
            return bool(self.lock.acquire(blocking=False))
        return bool(self.lock.acquire(blocking=True, timeout=timeout))

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.client.close()


class PotteryRedlock:
    def __init__(self, env: Env, name: str, ttl: float) -> None:
        import redis
        from pottery import Redlock

        self.client = redis.Redis.from_url(env["redis_url"])
        self.lock: Any = Redlock(key=f"bench:{name}", masters={self.client}, auto_release_time=ttl)

    def acquire(self, timeout: float | None) -> bool:
        if timeout == 0:
            return bool(self.lock.acquire(blocking=False))
        return bool(self.lock.acquire(blocking=True, timeout=-1 if timeout is None else timeout))

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.client.close()


def make_python_redis_lock(env: Env, name: str, ttl: float) -> PythonRedisLock:
    return PythonRedisLock(env, name, ttl)


def make_pottery(env: Env, name: str, ttl: float) -> PotteryRedlock:
    return PotteryRedlock(env, name, ttl)


def make_python_redis_lock_candidate(env: Env, name: str, ttl: float) -> LockCandidate:
    return LockCandidate(PythonRedisLock(env, name, ttl))
