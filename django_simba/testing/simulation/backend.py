"""Each simulated process's view of the one model backend.

Every process gets its own :class:`SimulatedBackend`, its connection: it forwards each
call to the shared :class:`MemoryBackend` (whose clock is the world's backend clock),
refuses calls while the backend is restarting, tells the oracle about every grant, and
receives notifications only through the simulated network, and only those it asked for
(the names it watches, the hand-overs to sessions it opened), so a paused process hears
nothing and a crashed one nothing ever again.

Every call may be lost, its request or its reply, or arrive late. Most calls reach it
through the process's runtime lanes, whose delays the runtime simulates; the loss is
decided here, where the operation is known. A few the engine makes in the caller's own
thread (a lock's first try and its release, a group join or leave, a close); those take
no simulated time, so they are lost, or applied after the caller has given up on them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar

from ...backends.memory import MemoryBackend
from ...spi import (
    BackendTimeout,
    BackendUnavailable,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    Notification,
    NotificationKind,
    NotificationListener,
    OpenedSession,
    Renewal,
    SessionExpired,
    SessionInfo,
    SimbaError,
)
from ..runtime import Unanswered
from .config import HandOver
from .network import (
    ANSWERED_LATE,
    APPLIED_LATE,
    LOST_REPLY,
    LOST_REQUEST,
    REFUSED,
    RESET_AFTER,
    RESET_BEFORE,
    SLOW_REPLY,
)

if TYPE_CHECKING:
    from .process import SimProcess
    from .world import World

T = TypeVar("T")


class SimulatedBackend(LeaseBackend):
    """The backend as one process sees it: same data as every other process, own notifications.

    This class frees a released name for everyone; its subclasses hand it over as the
    model does (:func:`backend_class`).
    """

    notifies = True
    needs_purge = True
    vendor = "simulated"

    def __init__(self, world: World, process: SimProcess, *, timeout: float) -> None:
        # Each call's timeout is its runtime's, and the engine must know it: it bounds how late a call
        # whose outcome is unknown may still land (a join or leave said again for that long). A wait
        # for a session would block the world's one thread, so the workload calls only with a session.
        super().__init__(timeout=timeout)
        self.hands_over = world.model.hands_over
        self._world = world
        self._process = process
        self._listener: NotificationListener | None = None
        self.watched: set[str] = set()  # lease names whose RELEASED reach this process
        self.watched_groups: set[str] = set()
        self.opened: set[str] = set()  # sessions opened through it: their hand-overs reach it

    def _call(self, operation: str, apply: Callable[[MemoryBackend], T]) -> T:
        world, process = self._world, self._process
        network = world.network
        fate = process.runtime.applying  # set while a lane call is applied, else a direct call
        via = "direct" if fate is None else "lane"
        if world.backend_down:
            network.count(process, operation, REFUSED, via, traced=False)
            raise BackendUnavailable("the backend is restarting")
        loss = network.loss(process)
        if loss is not None:
            network.count(process, operation, loss, via)
        if loss == RESET_BEFORE:
            raise BackendUnavailable("connection reset")
        if fate is None:
            late = network.direct_delay(process) if loss is None else 0.0
            if loss == LOST_REQUEST:
                raise BackendTimeout("request lost")
            if late:
                network.count(process, operation, APPLIED_LATE, via)
                world.schedule(world.now + late, lambda: self._apply_late(apply))
                raise BackendTimeout(f"no reply within {process.runtime.timeout} s")
        else:
            timeout = process.runtime.timeout
            if fate.request_delay > timeout:
                network.count(process, operation, APPLIED_LATE, via)
            elif fate.request_delay + fate.reply_delay > timeout:
                network.count(process, operation, ANSWERED_LATE, via)
            elif fate.request_delay + fate.reply_delay > world.config.renew:
                network.count(process, operation, SLOW_REPLY, via)
            if loss == LOST_REQUEST:
                raise Unanswered(operation)
        result = apply(world.model)
        if loss == RESET_AFTER:
            raise BackendUnavailable("connection reset")
        if loss == LOST_REPLY:
            if fate is None:
                raise BackendTimeout("reply lost")
            raise Unanswered(operation)
        return result

    def _apply_late(self, apply: Callable[[MemoryBackend], object]) -> None:
        """A direct call's request arrives, long after its caller gave up on it."""
        if self._world.backend_down:
            return
        with contextlib.suppress(SimbaError):  # nobody waits for the answer
            apply(self._world.model)

    def _trace(self, message: str, *args: object) -> None:
        self._world.trace.add(self._world.now, self._process.label, message, *args)

    # -- sessions ---------------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        def open_session(model: MemoryBackend) -> OpenedSession:
            opened = model.open_session(lease_duration, metadata)
            self.opened.add(opened.session_id)
            self._trace("open_session -> %s", opened.session_id)
            return opened

        return self._call("open_session", open_session)

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

        return self._call("keep_alive", keep_alive)

    def _close_session(self, session_id: str) -> None:
        if self._world.finished:
            return  # the interpreter's exit hook closing a simulated engine: nothing to do

        def close_session(model: MemoryBackend) -> None:
            model.close_session(session_id)
            self._trace("close_session %s", session_id)

        self._call("close_session", close_session)

    # -- leases -----------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        def acquire(model: MemoryBackend) -> Grant | None:
            try:
                grant = model.acquire(session_id, name, wait=wait)
            except SessionExpired:
                self._trace("acquire %s by %s -> session expired", name, session_id)
                raise
            if grant is None:
                waits = ", waits" if wait else ""
                self._trace("acquire %s by %s -> held elsewhere%s", name, session_id, waits)
            else:
                self._trace("acquire %s by %s -> token %d", name, session_id, grant.token)
                self._world.granted(name, session_id, grant.token)
            return grant

        return self._call("acquire", acquire)

    def _stop_waiting(self, session_id: str, name: str) -> None:
        def stop_waiting(model: MemoryBackend) -> None:
            model.stop_waiting(session_id, name)
            self._trace("stop_waiting %s by %s", name, session_id)

        self._call("stop_waiting", stop_waiting)

    def _release(self, session_id: str, name: str, token: int | None) -> None:
        def release(model: MemoryBackend) -> None:
            before = model.owner(name)
            model.release(session_id, name, token)
            after = model.owner(name)
            freed = (
                before is not None
                and before.session_id == session_id
                and (after is None or after.session_id != session_id)
            )
            effect = "" if freed else " (no effect)"
            if freed and after is not None:
                effect = f" (handed to {after.session_id})"
            self._trace("release %s#%s by %s%s", name, token, session_id, effect)
            if freed and before is not None:
                self._world.checker.released(self._process, session_id, name, before.token)

        self._call("release", release)

    def _owner(self, name: str) -> LeaseInfo | None:
        return self._call("owner", lambda model: model.owner(name))

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        return self._call("leases", lambda model: model.leases(prefix))

    def _force_release(self, name: str) -> bool:
        return self._call("force_release", lambda model: model.force_release(name))

    # -- groups -----------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        self._call("join", lambda model: model.join(session_id, group))

    def _leave(self, session_id: str, group: str) -> None:
        self._call("leave", lambda model: model.leave(session_id, group))

    def _members(self, group: str) -> list[Member]:
        return self._call("members", lambda model: model.members(group))

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        return self._call("groups", lambda model: model.groups(prefix))

    # -- operations -------------------------------------------------------------------

    def _sessions(self) -> list[SessionInfo]:
        return self._call("sessions", lambda model: model.sessions())

    def _purge_expired(self, limit: int) -> int:
        def purge(model: MemoryBackend) -> int:
            purged = model.purge_expired(limit)
            if purged:
                self._trace("purge_expired -> %d sessions", purged)
            return purged

        return self._call("purge_expired", purge)

    # -- notifications ----------------------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        self._listener = listener

    def watch_lease(self, name: str) -> None:
        self._call("watch_lease", lambda model: self.watched.add(name))

    def unwatch_lease(self, name: str) -> None:
        self._call("unwatch_lease", lambda model: self.watched.discard(name))

    def watch_group(self, group: str) -> None:
        self._call("watch_group", lambda model: self.watched_groups.add(group))

    def unwatch_group(self, group: str) -> None:
        self._call("unwatch_group", lambda model: self.watched_groups.discard(group))

    @property
    def notifying(self) -> bool:
        return self._listener is not None and not self._world.backend_down

    @property
    def subscribed(self) -> bool:
        return self._listener is not None

    def hears(self, notification: Notification) -> bool:
        """Whether the backend sends ``notification`` to this connection (it asked for it)."""
        if self._listener is None:
            return False
        kind = notification.kind
        if kind is NotificationKind.RELEASED:
            return notification.name in self.watched
        if kind is NotificationKind.GROUP_CHANGED:
            return notification.name in self.watched_groups
        if kind is NotificationKind.HANDED_OVER:
            return notification.session_id in self.opened
        return True  # RESYNC: the channel itself reconnected

    def deliver(self, notification: Notification) -> None:
        """A notification reached this process through the network."""
        if self._listener is not None:
            self._trace("notified: %s %s", notification.kind.value, notification.name)
            self._listener(notification)

    # -- lifecycle --------------------------------------------------------------------

    def _forget(self) -> None:
        self._listener = None
        self.watched.clear()
        self.watched_groups.clear()
        self.opened.clear()

    def after_fork(self) -> None:
        """In a forked child: the parent's connection and subscriptions are not the child's."""
        self._forget()

    def close(self) -> None:
        self._forget()


class HandingSimulatedBackend(SimulatedBackend):
    """Hands a released name to the first waiter; watches cost nothing while idle (Redis)."""

    idle_watches_are_free: ClassVar[bool] = True


class LineSimulatedBackend(SimulatedBackend):
    """Hands the name over at every end of a term; sessions expire by themselves (ZooKeeper)."""

    hands_over_always: ClassVar[bool] = True
    needs_purge = False


def backend_class(hand_over: HandOver) -> type[SimulatedBackend]:
    """The connection class that tells the engine what the model does with ended terms."""
    if hand_over is HandOver.ALWAYS:
        return LineSimulatedBackend
    if hand_over is HandOver.ON_RELEASE:
        return HandingSimulatedBackend
    return SimulatedBackend
