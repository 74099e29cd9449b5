"""An exact, thread-safe, in-process implementation of the backend interface.

For the engine's unit tests and the deterministic simulation: it keeps every
rule of the design (Rules) with an injectable clock, and lets tests inject what no client
can prevent (a restart that loses data, a step of the backend's clock, a
session record evicted early). It is not a coordination backend across processes.

It models the three ways the real backends end a term:

* :class:`MemoryBackend` frees a released name for every contender (the SQL backends,
  Redis Cluster);
* ``MemoryBackend(hand_over=True)`` gives a released name to the first live session of
  the name's line, with the next token, and tells that session alone (Redis single node);
* :class:`LineMemoryBackend` hands the name over at every end of a term, expiry and
  close included, and expires sessions on its own (ZooKeeper's line of nodes).

It is a little over 500 lines because it is one exact model: the three hand-over modes share
the session, lease and token state and every rule, and split apart they would each restate them.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

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


def _discard(index: dict[str, Any], key: str, item: str) -> None:
    """Take ``item`` out of the collection ``index[key]``, and the key once nothing is left."""
    items = index.get(key)
    if items is not None and item in items:
        items.remove(item)
        if not items:
            del index[key]


@dataclass(slots=True)
class _Session:
    expires_at: float
    metadata: str
    leases: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    lines: set[str] = field(default_factory=set)  # names whose line it waits in


@dataclass(slots=True)
class _Lease:
    token: int
    session_id: str = ""  # empty: free
    #: The holder's session record was evicted: the lease lasts on its own until then.
    orphan_until: float = 0.0


class MemoryBackend(LeaseBackend):
    """Sessions, leases and groups in a dict guarded by one lock.

    ``clock`` is the backend's clock in seconds (default ``time.monotonic``);
    ``id_factory`` makes session ids (the simulation passes a seeded one).
    ``hand_over``: a release gives the name to the first live session waiting for it.
    ``evictions_free_leases``: the leases of an evicted session end when the backend next
    hears from that session (its keep-alive), as Redis's keep-alive script does; otherwise
    they last until their own expiry.
    ``max_session``: the longest session it grants, in seconds, whatever is asked (a server
    limit, as ZooKeeper's ``maxSessionTimeout``); None grants what is asked.
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
        hand_over: bool = False,
        evictions_free_leases: bool = False,
        max_session: float | None = None,
    ) -> None:
        super().__init__(options, timeout=timeout)
        self.max_session = max_session
        self._clock: Clock = clock or time.monotonic
        self._new_id: Callable[[], str] = id_factory or (lambda: uuid.uuid4().hex)
        self.hands_over = hand_over or self.hands_over_always
        self.evictions_free_leases = evictions_free_leases
        self._mutex = threading.RLock()
        self._session_rows: dict[str, _Session] = {}
        self._lease_rows: dict[str, _Lease] = {}
        self._member_sets: dict[str, set[str]] = {}
        self._lines: dict[str, list[str]] = {}  # name -> sessions waiting for it, first first
        self._evicted: dict[str, set[str]] = {}  # evicted session -> the names it still holds
        self._listeners: list[NotificationListener] = []
        self.calls = 0  # every operation counts one round trip, for tests and benchmarks

    # -- helpers (mutex held) ----------------------------------------------------

    def _live(self, session_id: str, now: float) -> _Session | None:
        session = self._session_rows.get(session_id)
        return session if session is not None and session.expires_at > now else None

    def _expiry(self, lease: _Lease) -> float:
        """When the holder's claim on the lease ends (0: free)."""
        if not lease.session_id:
            return 0.0
        session = self._session_rows.get(lease.session_id)
        return session.expires_at if session is not None else lease.orphan_until

    def _holder(self, name: str, now: float) -> _Lease | None:
        lease = self._lease_rows.get(name)
        return lease if lease is not None and self._expiry(lease) > now else None

    def _current(self, lease: _Lease, session_id: str, now: float) -> bool:
        """Whether a held term still counts, as an acquire or a keep-alive of ``session_id`` judges it.

        A model of Redis overrides it: a term from before the server lost its data is over.
        """
        return True

    def _live_or_removed(self, session_id: str, now: float, events: list[Notification]) -> _Session | None:
        """The live session, or None after removing what is left of an expired one."""
        session = self._live(session_id, now)
        if session is None:
            events.extend(self._remove_session(session_id, now))
        return session

    def _held_back(self, session_id: str, now: float) -> bool:
        """Whether no new term may be granted now (a model of Redis's hold-back overrides it)."""
        return False

    def _next_token(self, lease: _Lease) -> int:
        """The token of the next term of ``lease`` (previous + 1; a model of Redis overrides it)."""
        return lease.token + 1

    def _grant(self, name: str, session_id: str, session: _Session) -> _Lease:
        """A new term of ``name`` for the live session."""
        lease = self._lease_rows.setdefault(name, _Lease(token=0))
        lease.token = self._next_token(lease)
        lease.session_id = session_id
        lease.orphan_until = 0.0
        session.leases.add(name)
        self._leave_line(session_id, name)
        return lease

    def _leave_line(self, session_id: str, name: str) -> None:
        _discard(self._lines, name, session_id)
        session = self._session_rows.get(session_id)
        if session is not None:
            session.lines.discard(name)

    def _end_term(self, name: str, lease: _Lease, now: float, *, hand_over: bool) -> Notification:
        """The term of ``lease`` ends: to the first live session of the line, or free for all."""
        lease.session_id = ""
        lease.orphan_until = 0.0
        line = self._lines.get(name, [])
        while hand_over and line:
            waiter = line[0]
            session = self._live(waiter, now)
            if session is None:
                self._leave_line(waiter, name)
                continue
            if self._held_back(waiter, now):
                break  # the name goes free; the waiter keeps its place and tries again
            handed = self._grant(name, waiter, session)
            return Notification(NotificationKind.HANDED_OVER, name, waiter, handed.token)
        return Notification(NotificationKind.RELEASED, name)

    def _remove_session(self, session_id: str, now: float) -> list[Notification]:
        session = self._session_rows.pop(session_id, None)
        if session is None:
            return []
        events = []
        for name in session.lines:
            _discard(self._lines, name, session_id)
        for name in sorted(session.leases):
            lease = self._lease_rows.get(name)
            if lease is not None and lease.session_id == session_id:
                events.append(self._end_term(name, lease, now, hand_over=self.hands_over_always))
        for group in session.groups:
            _discard(self._member_sets, group, session_id)
            events.append(Notification(NotificationKind.GROUP_CHANGED, group))
        return events

    def _free_orphans(self, session_id: str, now: float, *, expired_only: bool = False) -> list[Notification]:
        """End the terms an evicted session still holds (all of them, or those past their time)."""
        names = self._evicted.get(session_id)
        if not names:
            return []
        events = []
        for name in sorted(names):
            lease = self._lease_rows.get(name)
            if lease is None or lease.session_id != session_id:
                names.discard(name)
            elif not expired_only or lease.orphan_until <= now:
                names.discard(name)
                events.append(self._end_term(name, lease, now, hand_over=self.hands_over_always))
        if not names:
            del self._evicted[session_id]
        return events

    def _settle(self, now: float) -> list[Notification]:
        """A backend that expires sessions by itself: what it has done by ``now``."""
        if not self.hands_over_always:
            return []  # expired sessions wait for a keep-alive, an acquire or a purge to be removed
        events: list[Notification] = []
        for sid in [sid for sid, s in self._session_rows.items() if s.expires_at <= now]:
            events.extend(self._remove_session(sid, now))
        for sid in list(self._evicted):
            events.extend(self._free_orphans(sid, now, expired_only=True))
        return events

    def _granted(self, lease_duration: float) -> float:
        return lease_duration if self.max_session is None else min(lease_duration, self.max_session)

    def _notify(self, events: list[Notification]) -> None:
        for event in events:
            for listener in list(self._listeners):
                listener(event)

    # -- sessions -----------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        with self._mutex:
            self.calls += 1
            events = self._settle(self._clock())
            session_id = self._new_id()
            granted = self._granted(lease_duration)
            self._session_rows[session_id] = _Session(self._clock() + granted, metadata)
        self._notify(events)
        return OpenedSession(session_id, granted)

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            session = self._live_or_removed(session_id, now, events)
            owned: dict[str, int] = {}
            if session is None:
                if self.evictions_free_leases:
                    events.extend(self._free_orphans(session_id, now))
            else:
                session.expires_at = now + self._granted(lease_duration)
                owned = {
                    name: self._lease_rows[name].token
                    for name in session.leases
                    if self._lease_rows[name].session_id == session_id
                    and self._current(self._lease_rows[name], session_id, now)
                }
                session.leases = set(owned)
        self._notify(events)
        if session is None:
            raise SessionExpired(session_id)
        return Renewal(self._granted(lease_duration), owned)

    def _close_session(self, session_id: str) -> None:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            events.extend(self._remove_session(session_id, now))
            events.extend(self._free_orphans(session_id, now))  # a close frees what an evicted one held
        self._notify(events)

    # -- leases -------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            session = self._live_or_removed(session_id, now, events)
            lease = self._holder(name, now)
            if lease is not None and session is not None and not self._current(lease, session_id, now):
                lease = None  # over: free for a new term
            if session is None:
                grant = None
            elif lease is not None and lease.session_id != session_id:
                if wait and self.hands_over and name not in session.lines:
                    self._lines.setdefault(name, []).append(session_id)
                    session.lines.add(name)
                grant = None
            else:
                if lease is None and self._held_back(session_id, now):
                    grant = None
                else:
                    if lease is None:
                        lease = self._grant(name, session_id, session)
                    grant = Grant(name, lease.token, session.expires_at - now)
        self._notify(events)
        if session is None:
            raise SessionExpired(session_id)
        return grant

    def _stop_waiting(self, session_id: str, name: str) -> None:
        with self._mutex:
            self.calls += 1
            events = self._settle(self._clock())
            self._leave_line(session_id, name)
        self._notify(events)

    def _release(self, session_id: str, name: str, token: int | None) -> Released:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            lease = self._lease_rows.get(name)
            if lease is None or lease.session_id != session_id or token not in (None, lease.token):
                released = Released(held=False)
            else:
                session = self._session_rows.get(session_id)
                if session is not None:
                    session.leases.discard(name)
                self._evicted.get(session_id, set()).discard(name)
                released = Released(held=self._live(session_id, now) is not None)
                events.append(self._end_term(name, lease, now, hand_over=self.hands_over))
        self._notify(events)
        return released

    def _force_release(self, name: str) -> bool:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            held = self._holder(name, now) is not None
            lease = self._lease_rows.get(name)
            freed = lease is not None and bool(lease.session_id)
            if lease is not None and freed:
                events.append(self._end_term(name, lease, now, hand_over=self.hands_over_always))
        self._notify(events)
        return freed and held

    def _info(self, name: str, lease: _Lease, now: float) -> LeaseInfo:
        session = self._session_rows.get(lease.session_id)
        metadata = session.metadata if session is not None else ""
        return LeaseInfo(name, lease.session_id, lease.token, self._expiry(lease) - now, metadata)

    def _owner(self, name: str) -> LeaseInfo | None:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            lease = self._holder(name, now)
            info = self._info(name, lease, now) if lease is not None else None
        self._notify(events)
        return info

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            found = []
            for name in self._lease_rows:
                if name.startswith(prefix):
                    lease = self._holder(name, now)
                    if lease is not None:
                        found.append(self._info(name, lease, now))
        self._notify(events)
        return found

    # -- groups -------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            session = self._live_or_removed(session_id, now, events)
            if session is not None and session_id not in self._member_sets.get(group, ()):
                self._member_sets.setdefault(group, set()).add(session_id)
                session.groups.add(group)
                events.append(Notification(NotificationKind.GROUP_CHANGED, group))
        self._notify(events)
        if session is None:
            raise SessionExpired(session_id)

    def _leave(self, session_id: str, group: str) -> None:
        with self._mutex:
            self.calls += 1
            events = self._settle(self._clock())
            if session_id in self._member_sets.get(group, ()):
                _discard(self._member_sets, group, session_id)
                session = self._session_rows.get(session_id)
                if session is not None:
                    session.groups.discard(group)
                events.append(Notification(NotificationKind.GROUP_CHANGED, group))
        self._notify(events)

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
            now = self._clock()
            events = self._settle(now)
            found = self._live_members(group, now)
        self._notify(events)
        return found

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            found = {g: self._live_members(g, now) for g in self._member_sets if g.startswith(prefix)}
        self._notify(events)
        return found

    # -- operations ---------------------------------------------------------------

    def _sessions(self) -> list[SessionInfo]:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            rows = self._session_rows.items()
            found = [SessionInfo(sid, s.expires_at - now, s.metadata) for sid, s in rows]
        self._notify(events)
        return found

    def _purge_expired(self, limit: int) -> int:
        with self._mutex:
            self.calls += 1
            now = self._clock()
            events = self._settle(now)
            expired = sorted(
                (s.expires_at, sid) for sid, s in self._session_rows.items() if s.expires_at <= now
            )[:limit]
            for _, sid in expired:
                events.extend(self._remove_session(sid, now))
        self._notify(events)
        return len(expired)

    # -- notifications ------------------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        with self._mutex:
            self._listeners.append(listener)

    @property
    def notifying(self) -> bool:
        return bool(self._listeners)

    # -- what a server does on its own ----------------------------------------------

    def expire_due(self) -> None:
        """Carry out the expiries due by now (a backend that expires sessions by itself)."""
        with self._mutex:
            events = self._settle(self._clock())
        self._notify(events)

    def next_expiry(self) -> float | None:
        """The backend time of the next session or evicted lease expiry, if any."""
        with self._mutex:
            times = [s.expires_at for s in self._session_rows.values()]
            for names in self._evicted.values():
                times += [self._lease_rows[name].orphan_until for name in names]
            return min(times, default=None)

    # -- fault injection (tests and simulation) --------------------------------------

    def lose_everything(self) -> None:
        """A restart without persistence: every session, lease row, line and token is gone."""
        with self._mutex:
            self._session_rows.clear()
            self._lease_rows.clear()
            self._member_sets.clear()
            self._lines.clear()
            self._evicted.clear()

    def lose_sessions(self) -> None:
        """A restart that keeps lease rows (tokens) but loses the sessions' liveness."""
        with self._mutex:
            now = self._clock()
            for sid in list(self._session_rows):
                self._session_rows[sid].leases.clear()  # every lease is freed, none handed over
                self._remove_session(sid, now)
            for lease in self._lease_rows.values():
                lease.session_id = ""
                lease.orphan_until = 0.0
            self._lines.clear()
            self._evicted.clear()

    def evict_session(self, session_id: str) -> bool:
        """The session's record vanishes early (a Redis ``volatile-*`` eviction); True if it existed.

        The session is gone for keep-alive, acquire and join, out of its groups and lines, at
        once and silently. Its leases remain: until their own expiry (the session's expiry as
        of now), or, with ``evictions_free_leases``, until the session's next keep-alive.
        """
        with self._mutex:
            session = self._session_rows.pop(session_id, None)
            if session is None:
                return False
            for name in session.leases:
                lease = self._lease_rows.get(name)
                if lease is not None and lease.session_id == session_id:
                    lease.orphan_until = session.expires_at
                    self._evicted.setdefault(session_id, set()).add(name)
            for group in session.groups:
                _discard(self._member_sets, group, session_id)
            for name in session.lines:
                _discard(self._lines, name, session_id)
            return True

    def tokens(self) -> dict[str, int]:
        with self._mutex:
            return {name: lease.token for name, lease in self._lease_rows.items()}

    def line(self, name: str) -> list[str]:
        """The sessions waiting for ``name``, first first (tests)."""
        with self._mutex:
            return list(self._lines.get(name, ()))


class LineMemoryBackend(MemoryBackend):
    """Every end of a term hands the name to the first live session of its line.

    As ZooKeeper's line of sequential nodes does: a release, a close, a force release and
    an expiry all pass the name on, and sessions expire by themselves (no purge needed).
    """

    hands_over_always: ClassVar[bool] = True
    needs_purge = False
