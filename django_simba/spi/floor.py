"""Tokens above a floor: how a project moves to another backend without its fenced rows refusing it.

A name's tokens grow on one backend only. Moved from PostgreSQL to Redis, a project's
new terms start again from 1, while its rows still carry the tokens fenced under
PostgreSQL: the fence refuses every write until the new tokens pass the old ones.
``SIMBA["TOKEN_FLOOR"]`` set to the highest token issued on the old backend
(``manage.py simba_tokens`` prints it) lifts every token of the new one above it.

:func:`with_token_floor` wraps a backend so that every token it hands out (grants,
keep-alive listings, holders, hand-overs) is the backend's plus the floor, and every
token handed back to it (a release) is taken down again. Everything above the backend
(the engine, the admin, the commands) sees the lifted tokens alike. Each name's tokens
still strictly increase, whatever numbers the backend starts from, for as long as the
floor is never lowered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import types
from .backend import LeaseBackend, NotificationListener

#: The highest floor accepted: a token of the backend plus the floor must stay within a signed 64-bit
#: integer (a fenced column, a ZooKeeper zxid), with room to grow.
MAX_TOKEN_FLOOR = 2**62

#: What a backend says of itself as class attributes, copied onto the wrapper's class.
CAPABILITIES = (
    "notifies",
    "idle_watches_are_free",
    "needs_purge",
    "vendor",
    "hands_over_always",
    "uses_tables",
    "options_check_id",
)


def with_token_floor(backend: LeaseBackend, floor: int) -> LeaseBackend:
    """``backend`` itself when ``floor`` is 0, else a backend whose tokens are its own plus ``floor``."""
    if not floor:
        return backend
    inner = type(backend)
    capabilities = {name: getattr(inner, name) for name in CAPABILITIES}
    floored = type(f"Floored{inner.__name__}", (FlooredBackend,), capabilities)
    result: LeaseBackend = floored(backend, floor)
    return result


class FlooredBackend(LeaseBackend):
    """Another backend, with every token lifted by ``floor`` (see the module's docstring)."""

    def __init__(self, inner: LeaseBackend, floor: int) -> None:
        super().__init__(inner.options, timeout=inner.timeout)
        self.inner = inner
        self.floor = floor
        self.hands_over = inner.hands_over

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)  # not set yet (while constructing, or unpickling)
        return getattr(self.inner, name)  # what a backend has besides the interface (its store...)

    def _lifted(self, info: types.LeaseInfo) -> types.LeaseInfo:
        token = info.token + self.floor
        return types.LeaseInfo(info.name, info.session_id, token, info.remaining, info.metadata)

    # -- where tokens cross ----------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> types.Grant | None:
        grant = self.inner.acquire(session_id, name, wait=wait)
        return None if grant is None else types.Grant(grant.name, grant.token + self.floor, grant.remaining)

    def _keep_alive(self, session_id: str, lease_duration: float) -> types.Renewal:
        renewal = self.inner.keep_alive(session_id, lease_duration)
        owned = {name: token + self.floor for name, token in renewal.owned.items()}
        return types.Renewal(renewal.remaining, owned)

    def _release(self, session_id: str, name: str, token: int | None) -> types.Released:
        if token is not None and token <= self.floor:
            return types.Released(held=False)  # a term from before the floor: never this backend's
        return self.inner.release(session_id, name, None if token is None else token - self.floor)

    def _owner(self, name: str) -> types.LeaseInfo | None:
        info = self.inner.owner(name)
        return None if info is None else self._lifted(info)

    def _leases(self, prefix: str) -> list[types.LeaseInfo]:
        return [self._lifted(info) for info in self.inner.leases(prefix)]

    def subscribe(self, listener: NotificationListener) -> None:
        floor = self.floor

        def lifted(event: types.Notification) -> None:
            if event.kind is types.NotificationKind.HANDED_OVER:
                event = types.Notification(event.kind, event.name, event.session_id, event.token + floor)
            listener(event)

        self.inner.subscribe(lifted)

    # -- the rest goes through as it is --------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> types.OpenedSession:
        return self.inner.open_session(lease_duration, metadata)

    def _close_session(self, session_id: str) -> None:
        self.inner.close_session(session_id)

    def _stop_waiting(self, session_id: str, name: str) -> None:
        self.inner.stop_waiting(session_id, name)

    def _force_release(self, name: str) -> bool:
        return self.inner.force_release(name)

    def _join(self, session_id: str, group: str) -> None:
        self.inner.join(session_id, group)

    def _leave(self, session_id: str, group: str) -> None:
        self.inner.leave(session_id, group)

    def _members(self, group: str) -> list[types.Member]:
        return self.inner.members(group)

    def _groups(self, prefix: str) -> dict[str, list[types.Member]]:
        return self.inner.groups(prefix)

    def _sessions(self) -> list[types.SessionInfo]:
        return self.inner.sessions()

    def _purge_expired(self, limit: int) -> int:
        return self.inner.purge_expired(limit)

    def watch_lease(self, name: str) -> None:
        self.inner.watch_lease(name)

    def unwatch_lease(self, name: str) -> None:
        self.inner.unwatch_lease(name)

    def watch_group(self, group: str) -> None:
        self.inner.watch_group(group)

    def unwatch_group(self, group: str) -> None:
        self.inner.unwatch_group(group)

    @property
    def notifying(self) -> bool:
        return self.inner.notifying

    def check_caller(self) -> None:
        self.inner.check_caller()

    def after_fork(self) -> None:
        self.inner.after_fork()

    def close(self) -> None:
        self.inner.close()

    @classmethod
    def options_problems(cls, options: Mapping[str, Any], *, timeout: float = 5.0) -> list[Any]:
        return []  # judged by the backend it wraps, by its own class


__all__ = ["MAX_TOKEN_FLOOR", "FlooredBackend", "with_token_floor"]
