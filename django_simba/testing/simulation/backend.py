"""Each simulated process's view of the one model backend.

Every process gets its own :class:`SimulatedBackend`: it forwards each call to the
shared :class:`MemoryBackend` (whose clock is the world's backend clock), refuses
calls while the backend is restarting, tells the oracle about every grant, and
receives notifications only through the simulated network, so a paused process
hears nothing and a crashed one nothing ever again.

Most calls reach it through the process's runtime lanes, whose network the runtime
simulates. A few the engine makes in the caller's own thread (a lock's first try
and its release, a group join); those take no simulated time here, but a lossy
network still loses their request or their reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ...backends.memory import MemoryBackend
from ...spi import (
    BackendTimeout,
    BackendUnavailable,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    Notification,
    NotificationListener,
    OpenedSession,
    Renewal,
    SessionExpired,
    SessionInfo,
)

if TYPE_CHECKING:
    from .process import SimProcess
    from .world import World

T = TypeVar("T")


class SimulatedBackend(LeaseBackend):
    """The backend as one process sees it: same data as every other process, own notifications."""

    notifies = True
    needs_purge = True
    vendor = "simulated"

    def __init__(self, world: World, process: SimProcess, *, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self._world = world
        self._process = process
        self._listener: NotificationListener | None = None

    def _call(self, operation: Callable[[MemoryBackend], T]) -> T:
        if self._world.backend_down:
            raise BackendUnavailable("the backend is restarting")
        direct = self._world.current is self._process  # else: applied from the wire
        fate = self._world.network.direct_fate(self._process) if direct else None
        if fate is not None and fate.lose_request:
            raise BackendTimeout("request lost")
        result = operation(self._world.model)
        if fate is not None and fate.lose_reply:
            raise BackendTimeout("reply lost")
        return result

    def _trace(self, message: str, *args: object) -> None:
        self._world.trace.add(self._world.now, self._process.label, message, *args)

    # -- sessions ---------------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        def open_session(model: MemoryBackend) -> OpenedSession:
            opened = model.open_session(lease_duration, metadata)
            self._trace("open_session -> %s", opened.session_id)
            return opened

        return self._call(open_session)

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        def keep_alive(model: MemoryBackend) -> Renewal:
            try:
                renewal = model.keep_alive(session_id, lease_duration)
            except SessionExpired:
                self._trace("keep_alive %s -> session expired", session_id)
                raise
            owned = dict(sorted(renewal.owned.items()))  # sets inside the model: make the order reproducible
            self._trace("keep_alive %s -> owns %s", session_id, owned)
            return Renewal(renewal.remaining, owned)

        return self._call(keep_alive)

    def _close_session(self, session_id: str) -> None:
        if self._world.finished:
            return  # the interpreter's exit hook closing a simulated engine: nothing to do

        def close_session(model: MemoryBackend) -> None:
            model.close_session(session_id)
            self._trace("close_session %s", session_id)

        self._call(close_session)

    # -- leases -----------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        def acquire(model: MemoryBackend) -> Grant | None:
            try:
                grant = model.acquire(session_id, name)
            except SessionExpired:
                self._trace("acquire %s by %s -> session expired", name, session_id)
                raise
            if grant is None:
                self._trace("acquire %s by %s -> held elsewhere", name, session_id)
            else:
                self._trace("acquire %s by %s -> token %d", name, session_id, grant.token)
                self._world.granted(name, session_id, grant.token)
            return grant

        return self._call(acquire)

    def _release(self, session_id: str, name: str, token: int | None) -> None:
        def release(model: MemoryBackend) -> None:
            holder = model.owner(name)
            model.release(session_id, name, token)
            freed = holder is not None and holder.session_id == session_id and model.owner(name) is None
            self._trace("release %s#%s by %s%s", name, token, session_id, "" if freed else " (no effect)")
            if freed and holder is not None:
                self._world.checker.released(self._process, session_id, name, holder.token)

        self._call(release)

    def _owner(self, name: str) -> LeaseInfo | None:
        return self._call(lambda model: model.owner(name))

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        return self._call(lambda model: model.leases(prefix))

    def _force_release(self, name: str) -> bool:
        return self._call(lambda model: model.force_release(name))

    # -- groups -----------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        self._call(lambda model: model.join(session_id, group))

    def _leave(self, session_id: str, group: str) -> None:
        self._call(lambda model: model.leave(session_id, group))

    def _members(self, group: str) -> list[Member]:
        return self._call(lambda model: model.members(group))

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        return self._call(lambda model: model.groups(prefix))

    # -- operations -------------------------------------------------------------------

    def _sessions(self) -> list[SessionInfo]:
        return self._call(lambda model: model.sessions())

    def _purge_expired(self, limit: int) -> int:
        def purge(model: MemoryBackend) -> int:
            purged = model.purge_expired(limit)
            if purged:
                self._trace("purge_expired -> %d sessions", purged)
            return purged

        return self._call(purge)

    # -- notifications ----------------------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        self._listener = listener

    @property
    def notifying(self) -> bool:
        return self._listener is not None and not self._world.backend_down

    @property
    def subscribed(self) -> bool:
        return self._listener is not None

    def deliver(self, notification: Notification) -> None:
        """A notification reached this process through the network."""
        if self._listener is not None:
            self._trace("notified: %s %s", notification.kind.value, notification.name)
            self._listener(notification)
