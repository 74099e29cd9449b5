"""An exact, thread-safe, in-process implementation of the backend interface.

For the engine's unit tests and the deterministic simulation: it keeps every
rule of SPEC 2 with an injectable clock, and lets tests inject what no client
can prevent (a restart that loses data, a step of the backend's clock).
It is not a coordination backend across processes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...spi import (
    DEFAULT_TIMEOUT,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    Notification,
    NotificationKind,
    NotificationListener,
    OpenedSession,
    Released,
    Renewal,
    SessionExpired,
    SessionInfo,
)

Clock = Callable[[], float]


@dataclass(slots=True)
class _Session:
    expires_at: float
    metadata: str
    leases: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Lease:
    token: int
    session_id: str = ""  # empty: free


class MemoryBackend(LeaseBackend):
    """Sessions, leases and groups in a dict guarded by one lock.

    ``clock`` is the backend's clock in seconds (default ``time.monotonic``);
    ``id_factory`` makes session ids (the simulation passes a seeded one).
    """

    notifies = True
    needs_purge = True
    vendor = "memory"

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        super().__init__(options, timeout=timeout)
        self._clock: Clock = clock or time.monotonic
        self._new_id: Callable[[], str] = id_factory or (lambda: uuid.uuid4().hex)
        self._mutex = threading.RLock()
        self._session_rows: dict[str, _Session] = {}
        self._lease_rows: dict[str, _Lease] = {}
        self._member_sets: dict[str, set[str]] = {}
        self._listeners: list[NotificationListener] = []
        self.calls = 0  # every operation counts one round trip, for tests and benchmarks

    # -- helpers (mutex held) ----------------------------------------------------

    def _live(self, session_id: str, now: float) -> _Session | None:
        session = self._session_rows.get(session_id)
        return session if session is not None and session.expires_at > now else None

    def _holder(self, name: str, now: float) -> tuple[_Lease, _Session] | None:
        lease = self._lease_rows.get(name)
        if lease is None or not lease.session_id:
            return None
        session = self._live(lease.session_id, now)
        return (lease, session) if session is not None else None

    def _require_live(self, session_id: str, now: float) -> _Session:
        session = self._live(session_id, now)
        if session is None:
            self._remove_session(session_id)
            raise SessionExpired(session_id)
        return session

    def _remove_session(self, session_id: str) -> list[Notification]:
        session = self._session_rows.pop(session_id, None)
        if session is None:
            return []
        events = []
        for name in session.leases:
            lease = self._lease_rows.get(name)
            if lease is not None and lease.session_id == session_id:
                lease.session_id = ""
                events.append(Notification(NotificationKind.RELEASED, name))
        for group in session.groups:
            members = self._member_sets.get(group)
            if members is not None:
                members.discard(session_id)
                if not members:
                    del self._member_sets[group]
            events.append(Notification(NotificationKind.GROUP_CHANGED, group))
        return events

    def _notify(self, events: list[Notification]) -> None:
        for event in events:
            for listener in list(self._listeners):
                listener(event)

    # -- sessions -----------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        with self._mutex:
            self.calls += 1
            session_id = self._new_id()
            self._session_rows[session_id] = _Session(self._clock() + lease_duration, metadata)
            return OpenedSession(session_id, lease_duration)

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            session = self._live(session_id, now)
            if session is None:
                events = self._remove_session(session_id)
            else:
                session.expires_at = now + lease_duration
                owned = {
                    name: self._lease_rows[name].token
                    for name in session.leases
                    if self._lease_rows[name].session_id == session_id
                }
                session.leases = set(owned)
                return Renewal(lease_duration, owned)
        self._notify(events)
        raise SessionExpired(session_id)

    def _close_session(self, session_id: str) -> None:
        with self._mutex:
            self.calls += 1
            events = self._remove_session(session_id)
        self._notify(events)

    # -- leases -------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            session = self._require_live(session_id, now)
            holder = self._holder(name, now)
            if holder is not None:
                lease, _ = holder
                if lease.session_id != session_id:
                    return None
            else:
                lease = self._lease_rows.setdefault(name, _Lease(token=0))
                lease.token += 1
                lease.session_id = session_id
                session.leases.add(name)
            return Grant(name, lease.token, session.expires_at - now)

    def _release(self, session_id: str, name: str, token: int | None) -> Released:
        with self._mutex:
            self.calls += 1
            lease = self._lease_rows.get(name)
            if lease is None or lease.session_id != session_id:
                return Released(held=False)
            if token is not None and lease.token != token:
                return Released(held=False)
            lease.session_id = ""
            session = self._session_rows.get(session_id)
            if session is not None:
                session.leases.discard(name)
            live = session is not None and session.expires_at > self._clock()
        self._notify([Notification(NotificationKind.RELEASED, name)])
        return Released(held=live)

    def _force_release(self, name: str) -> bool:
        with self._mutex:
            self.calls += 1
            holder = self._holder(name, self._clock())
            lease = self._lease_rows.get(name)
            if lease is None or not lease.session_id:
                return False
            lease.session_id = ""
        self._notify([Notification(NotificationKind.RELEASED, name)])
        return holder is not None

    def _info(self, name: str, lease: _Lease, session: _Session, now: float) -> LeaseInfo:
        return LeaseInfo(name, lease.session_id, lease.token, session.expires_at - now, session.metadata)

    def _owner(self, name: str) -> LeaseInfo | None:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            holder = self._holder(name, now)
            return self._info(name, *holder, now) if holder else None

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            found = []
            for name in self._lease_rows:
                if name.startswith(prefix):
                    holder = self._holder(name, now)
                    if holder is not None:
                        found.append(self._info(name, *holder, now))
            return found

    # -- groups -------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        with self._mutex:
            self.calls += 1
            session = self._require_live(session_id, self._clock())
            members = self._member_sets.setdefault(group, set())
            if session_id in members:
                return
            members.add(session_id)
            session.groups.add(group)
        self._notify([Notification(NotificationKind.GROUP_CHANGED, group)])

    def _leave(self, session_id: str, group: str) -> None:
        with self._mutex:
            self.calls += 1
            members = self._member_sets.get(group)
            if members is None or session_id not in members:
                return
            members.discard(session_id)
            if not members:
                del self._member_sets[group]
            session = self._session_rows.get(session_id)
            if session is not None:
                session.groups.discard(group)
        self._notify([Notification(NotificationKind.GROUP_CHANGED, group)])

    def _live_members(self, group: str, now: float) -> list[Member]:
        found = []
        for session_id in self._member_sets.get(group, ()):
            session = self._live(session_id, now)
            if session is not None:
                found.append(Member(session_id, session.metadata))
        return found

    def _members(self, group: str) -> list[Member]:
        with self._mutex:
            self.calls += 1
            return self._live_members(group, self._clock())

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            return {g: self._live_members(g, now) for g in self._member_sets if g.startswith(prefix)}

    # -- operations ---------------------------------------------------------------

    def _sessions(self) -> list[SessionInfo]:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            return [SessionInfo(sid, s.expires_at - now, s.metadata) for sid, s in self._session_rows.items()]

    def _purge_expired(self, limit: int) -> int:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            expired = sorted(
                (s.expires_at, sid) for sid, s in self._session_rows.items() if s.expires_at <= now
            )[:limit]
            events: list[Notification] = []
            for _, sid in expired:
                events.extend(self._remove_session(sid))
        self._notify(events)
        return len(expired)

    # -- notifications ------------------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        with self._mutex:
            self._listeners.append(listener)

    @property
    def notifying(self) -> bool:
        return bool(self._listeners)

    # -- fault injection (tests and simulation) --------------------------------------

    def lose_everything(self) -> None:
        """A restart without persistence: every session, lease row and token is gone."""
        with self._mutex:
            self._session_rows.clear()
            self._lease_rows.clear()
            self._member_sets.clear()

    def lose_sessions(self) -> None:
        """A restart that keeps lease rows (tokens) but loses the sessions' liveness."""
        with self._mutex:
            for sid in list(self._session_rows):
                self._remove_session(sid)

    def tokens(self) -> dict[str, int]:
        with self._mutex:
            return {name: lease.token for name, lease in self._lease_rows.items()}
