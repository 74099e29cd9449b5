"""Applies the planned episodes to the world as their start and end come due."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...spi import Notification, NotificationKind
from .faults import Episode, FaultKind
from .forgetful import FORGETTING, forgetting_begins, forgetting_ends
from .sharing import force_release

if TYPE_CHECKING:
    from .process import SimProcess
    from .world import World

#: Episodes the network carries out.
NETWORK_KINDS = frozenset(
    {FaultKind.LOSSY_NETWORK, FaultKind.SLOW_NETWORK, FaultKind.LATE_WRITES, FaultKind.LOST_NOTIFICATIONS}
)


class Injector:
    """Starts and ends each episode; a crash or a resignation picks a leader when there is one."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._resigned: dict[Episode, tuple[SimProcess, str]] = {}
        self._children: dict[Episode, SimProcess] = {}

    def _target(self, episode: Episode) -> SimProcess | None:
        return None if episode.seat is None else self.world.seats[episode.seat]

    def begin(self, episode: Episode) -> None:
        world, kind = self.world, episode.kind
        world.faults[f"episode: {kind.value}"] += 1
        world.trace.add(
            world.now, "FAULT", "%s begins (seat %s, until %.3f)", kind.value, episode.seat, episode.end
        )
        target = self._target(episode)
        if kind in NETWORK_KINDS:
            world.network.begin(episode)
        elif kind is FaultKind.PAUSE:
            if target is not None:
                world.pause(target, episode.end - episode.start)
        elif kind is FaultKind.CRASH:
            self._crash(episode, target)
        elif kind is FaultKind.RESIGN:
            self._resign(episode, target)
        elif kind is FaultKind.SESSION_EVICTED:
            self._evict(self._leader_or(target))
        elif kind is FaultKind.FORK:
            parent = self._leader_or(target)
            if parent is not None:
                self._children[episode] = world.fork(parent)
        elif kind is FaultKind.RESTART:
            if target is not None:
                world.faults["graceful restart"] += 1
                world.exit(target)
        elif kind is FaultKind.FORCE_RELEASE:
            force_release(world)
        elif kind is FaultKind.BACKEND_RESTART:
            world.backend_down = True
            world.faults["backend restart"] += 1
        elif kind in FORGETTING:
            forgetting_begins(world, kind)
        elif kind is FaultKind.TOKEN_RESET:
            world.model.lose_everything()
        elif kind is FaultKind.SESSIONS_LOST:
            world.model.lose_sessions()
        elif kind is FaultKind.CLOCK_STEP:
            world.backend_offset += episode.strength * world.config.lease

    def end(self, episode: Episode) -> None:
        world, kind = self.world, episode.kind
        world.trace.add(world.now, "FAULT", "%s ends (seat %s)", kind.value, episode.seat)
        if kind in NETWORK_KINDS:
            world.network.end(episode)
        elif kind is FaultKind.PAUSE:
            target = self._target(episode)
            if target is not None and target.paused:
                world.resume(target)
        elif kind in (FaultKind.CRASH, FaultKind.RESTART):
            for seat, process in enumerate(world.seats):
                if process is None:
                    world.spawn(seat)
        elif kind is FaultKind.FORK:
            child = self._children.pop(episode, None)
            if child is not None and not child.stopped:
                self._end_child(child)
        elif kind is FaultKind.RESIGN:
            resigned = self._resigned.pop(episode, None)
            if resigned is not None and not resigned[0].stopped:
                process, name = resigned
                world.current = process
                world.ran.append(process)
                process.app.stand(name)
        elif kind is FaultKind.BACKEND_RESTART:
            world.backend_down = False
            world.notify(Notification(NotificationKind.RESYNC))  # the channel reconnected
        elif kind in FORGETTING:
            forgetting_ends(world, kind)

    def _leaders(self) -> list[tuple[SimProcess, str]]:
        """The leaders among the processes of the seats (a forked child is no target)."""
        world = self.world
        processes = [p for p in world.seats if p is not None]
        return [(p, name) for p in processes for name in world.config.names if p.app.believed(name)]

    def _leader_or(self, target: SimProcess | None) -> SimProcess | None:
        """A leader most of the time, else the episode's target."""
        leaders = self._leaders()
        if leaders and self.world.rng.random() < 0.8:
            return self.world.rng.choice(leaders)[0]
        return target

    def _evict(self, process: SimProcess | None) -> None:
        """The backend drops the session record of ``process`` early (memory pressure)."""
        world = self.world
        session_id = process.engine.session_id if process is not None else None
        if process is None or session_id is None or not world.model.evict_session(session_id):
            return
        world.faults["session evicted"] += 1
        world.trace.add(world.now, "BACKEND", "session %s of %s EVICTED", session_id, process.label)

    def _end_child(self, child: SimProcess) -> None:
        """A forked child exits: at interpreter exit (closing its engine), or killed."""
        world = self.world
        if world.rng.random() < 0.5:
            world.faults["forked child exits"] += 1
            world.exit(child)
        else:
            world.faults["forked child killed"] += 1
            world.crash(child, checked=False)

    def _crash(self, episode: Episode, target: SimProcess | None) -> None:
        """Crash a leader most of the time, else the episode's seat.

        The take-over is held to the bound only when no other episode (or its
        after-effects) touches the window, and a candidate is ready: running, with a
        session live on the backend.
        """
        world = self.world
        target = self._leader_or(target)
        if target is None:
            return
        config = world.config
        window_end = world.now + config.takeover_bound
        disturbed = any(
            other is not episode and other.touches(world.now, window_end, config.settle)
            for other in world.episodes
        )
        ready = any(
            p is not None and p is not target and not p.paused and self._live_on_backend(p.engine.session_id)
            for p in world.seats
        )
        world.crash(target, checked=ready and not disturbed)

    def _resign(self, episode: Episode, target: SimProcess | None) -> None:
        """A leader (or, without one, the episode's seat) steps down from one name."""
        world = self.world
        leaders = self._leaders()
        if leaders:
            process, name = world.rng.choice(leaders)
        elif target is not None:
            process, name = target, world.rng.choice(world.config.names)
        else:
            return
        world.current = process
        world.ran.append(process)
        if process.app.resign(name):
            self._resigned[episode] = (process, name)
            world.faults["resign"] += 1
            world.trace.add(world.now, process.label, "resigns from %s", name)
        world.current = None

    def _live_on_backend(self, session_id: str | None) -> bool:
        world = self.world
        if session_id is None or world.backend_down:
            return False
        return any(s.session_id == session_id and s.remaining > 0 for s in world.model.sessions())
