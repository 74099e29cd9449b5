"""The world: one event heap and one clock for every simulated process, the backend and the network.

Everything runs in the calling thread. Events are ordered by (world time,
sequence), so a seed fixes the whole run. After each event the oracle
(:mod:`.invariants`) looks at what changed: the beliefs of the process whose code
ran, and every believer of a name the backend just granted; the register judges
each write as it arrives. ``SimulationConfig.check_every_event`` makes it look at
everything after every event instead.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable

from ...spi import Notification, NotificationKind
from .app import GROUP
from .config import HandOver, Premise, SimulationConfig
from .faults import plan_faults
from .forgetful import model_for
from .injector import Injector
from .invariants import Checker, GrantLog
from .network import Network
from .process import SimProcess, WorldTimer
from .register import FencedRegister, Write
from .result import SimulationResult
from .short_grants import FAULT as SHORT_GRANTS
from .short_grants import session_cap
from .trace import Trace, engine_logs_into

#: How much slower than DRIFT allows a clock runs under the drift premise.
EXCESS_DRIFT = 10.0
#: A backend that expires sessions by itself does so this long after they are due, and looks
#: again this often while it restarts.
EXPIRY_LAG = 0.001
EXPIRY_WHILE_DOWN = 0.1


#: An event on the world's heap: (world time, sequence, what it runs, the process that runs it (None:
#: the world), its local due time, the timer that may cancel it (None for most: nothing cancels them)).
Event = tuple[float, int, Callable[[], None], "SimProcess | None", float, "WorldTimer | None"]


class World:
    """Processes, backend, network and oracle of one run. Use :func:`simulate` to run one."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.now = 0.0
        self.finished = False
        self.backend_down = False
        self.backend_offset = 0.0  # a step of the backend's clock (premise)
        self.events = 0
        self._heap: list[Event] = []
        self._sequence = itertools.count()
        self.rng = random.Random(f"{config.seed}:world")
        self.trace = Trace(config.trace_size)
        self.faults: Counter[str] = Counter()
        network_rng = random.Random(f"{config.seed}:network")
        self.network = Network(config, network_rng, self._now, self.faults, self.trace)
        self.grants = GrantLog()
        self.checker = Checker(config, self.grants, self.trace, self._now)
        self.register = FencedRegister()
        self._session_numbers = itertools.count(1)
        self._pids = itertools.count(100)
        draw = random.Random(f"{config.seed}:backend").choice(list(HandOver))
        self.hand_over = config.hand_over or draw
        self.model = model_for(
            config,
            self.hand_over,
            timeout=config.timeout,
            clock=self.backend_now,
            id_factory=self._session_id,
            hand_over=self.hand_over is HandOver.ON_RELEASE,
            evictions_free_leases=Premise.EVICTION_FREES_LEASES in config.premises,
            max_session=session_cap(config),
        )
        self.model.subscribe(self._on_model_notification)
        self._notifications: list[Notification] = []
        self.seats: list[SimProcess | None] = [None] * config.processes
        self.alive: list[SimProcess] = []
        self.processes: list[SimProcess] = []  # every process ever started
        self._recovered_by: float | None = None
        self._numbers = itertools.count(1)
        self.current: SimProcess | None = None  # whose code is running (log lines, direct calls)
        # what the step just run did that the oracle must look at
        self.ran: list[SimProcess] = []  # processes whose code a world event ran
        self._granted: list[str] = []
        self.episodes = plan_faults(config, random.Random(f"{config.seed}:faults"))
        #: When the last fault ends: the workload disturbs nothing on its own after it.
        self.calm_from = max((e.end for e in self.episodes), default=0.0)
        self.injector = Injector(self)

    # -- clocks and the heap -----------------------------------------------------------

    def _now(self) -> float:
        return self.now

    def backend_now(self) -> float:
        return self.now + self.backend_offset

    def _who(self) -> str:
        return self.current.label if self.current is not None else "-"

    def _session_id(self) -> str:
        return f"s{next(self._session_numbers)}"

    def new_pid(self) -> int:
        return next(self._pids)

    def schedule(
        self,
        when: float,
        fn: Callable[[], None],
        owner: SimProcess | None = None,
        local_due: float = 0.0,
        timer: WorldTimer | None = None,
    ) -> None:
        now = self.now
        # max(when, now) without the call: this runs for every event
        heapq.heappush(
            self._heap, (now if now > when else when, next(self._sequence), fn, owner, local_due, timer)
        )

    # -- running -----------------------------------------------------------------------

    def run(self) -> SimulationResult:
        """The whole run: start, every event up to the configured duration, the final checks."""
        with engine_logs_into(self.trace, self._now, self._who):
            self.start()
            self.advance_to(self.config.duration)
            return self.finish()

    def start(self) -> None:
        """Schedule the processes' start, the fault episodes, and the backend's own expiries."""
        self.trace.add(self.now, "BACKEND", "hands names over: %s", self.hand_over.value)
        if self.model.max_session is not None:
            self.faults[SHORT_GRANTS] += 1
            self.trace.add(self.now, "BACKEND", "grants sessions of %.3f s at most", self.model.max_session)
        if self.model.hands_over_always:
            self.schedule(0.0, self._expire_on_backend)
        for seat in range(self.config.processes):
            self.schedule(self.rng.uniform(0.0, 0.5), lambda seat=seat: self.spawn(seat))  # type: ignore[misc]
        for episode in self.episodes:
            self.schedule(episode.start, lambda e=episode: self.injector.begin(e))  # type: ignore[misc]
            if episode.end > episode.start:
                self.schedule(episode.end, lambda e=episode: self.injector.end(e))  # type: ignore[misc]
        self._recovered_by = self._recovery_due()
        if self._recovered_by is not None:
            since = max((e.end for e in self.episodes), default=0.0)
            self.checker.watch_recovery(since)
            self.schedule(since, lambda: self.checker.check_all(self.alive))

    def advance_to(self, until: float) -> None:
        """Run every event due up to ``until``; the clock then reads ``until``."""
        self._loop(until)
        self.now = max(self.now, until)

    def finish(self) -> SimulationResult:
        """The checks at the end of the run, and what it found."""
        members = {m.session_id for m in self.model.members(GROUP)}
        self.checker.finish(self.alive, members, self._recovered_by)
        self.finished = True
        for process in self.processes:
            process.app.sharing.close()
        accepted, rejected = self.register.counts()
        checker = self.checker
        return SimulationResult(
            self.config,
            checker.violations,
            self.faults,
            checker.takeovers,
            self.events,
            accepted,
            rejected,
            checker.recovery,
            checker.first_trace if checker.first_trace is not None else self.trace.lines(),
            self.network.call_faults,
            self.hand_over.value,
        )

    def _loop(self, until: float) -> None:
        heap = self._heap
        pop = heapq.heappop
        every_event = self.config.check_every_event
        checker = self.checker
        ran, granted = self.ran, self._granted
        while heap and heap[0][0] <= until:
            event = pop(heap)
            when, _, fn, owner, local_due, timer = event
            if timer is not None and timer.cancelled:
                continue
            self.now = when
            if owner is not None:
                if owner.stopped:
                    continue
                if owner.paused:
                    owner.held.append(event)
                    continue
                runtime = owner.runtime
                if local_due > runtime.floor:
                    runtime.floor = local_due
            self.current = owner
            fn()
            self.current = None
            self.events += 1
            if self._notifications:
                self._dispatch_notifications()
            if every_event:
                checker.check_all(self.alive)
            elif owner is not None:
                checker.process_ran(owner, self.alive)
            if ran or granted:  # rarely: most events start, grant and fork nothing
                for process in ran:  # process code run by a world event (start, resign, stand, fork)
                    if not process.stopped:
                        checker.process_ran(process, self.alive)
                for name in granted:
                    checker.name_granted(name, self.alive)
                ran.clear()
                granted.clear()

    def _recovery_due(self) -> float | None:
        """When every name must have a leader again: every fault settled, then the recovery bound."""
        last = max((e.end for e in self.episodes), default=0.0)
        if self.config.premises:
            return None  # a premise may leave the backend in any state
        due = last + self.config.settle + self.config.recovery_bound
        return due if due <= self.config.duration else None

    # -- processes -----------------------------------------------------------------------

    def spawn(self, seat: int) -> None:
        drift = self.config.drift
        if Premise.DRIFT_EXCEEDED in self.config.premises and seat == 0:
            rate = 1.0 - EXCESS_DRIFT * drift
            self.faults["clock slower than DRIFT allows"] += 1
        elif self.rng.random() < 0.5:
            rate = 1.0 + self.rng.choice((-1.0, 1.0)) * 0.999 * drift  # at the edge of what DRIFT allows
        else:
            rate = 1.0 + self.rng.uniform(-0.999, 0.999) * drift
        if rate != 1.0:
            self.faults["drifting clock"] += 1
        patient = self.rng.random() < 0.2  # waits long enough to see replies land past its deadlines
        process = SimProcess(self, seat, next(self._numbers), rate=rate, patient=patient)
        self.seats[seat] = process
        self.alive.append(process)
        self.processes.append(process)
        timeout = process.runtime.timeout
        self.trace.add(self.now, process.label, "started (rate %.5f, timeout %.1f s)", rate, timeout)
        self.current = process
        self.ran.append(process)
        process.start()

    def crash(self, process: SimProcess, checked: bool) -> None:
        self.checker.leader_crashed(process, checked)
        self._stop(process)
        self.faults["crash"] += 1
        self.trace.add(self.now, process.label, "CRASHED")

    def _stop(self, process: SimProcess) -> None:
        process.stopped = True
        process.held.clear()
        self.alive.remove(process)
        if self.seats[process.seat] is process:
            self.seats[process.seat] = None

    def exit(self, process: SimProcess) -> None:
        """``process`` closes its engine and exits, as at interpreter exit."""
        self.trace.add(self.now, process.label, "exits, closing its engine")
        self.current = process
        self.ran.append(process)
        process.engine.close()
        self.current = None
        self._stop(process)

    def fork(self, parent: SimProcess) -> SimProcess:
        """``parent`` forks a child without fork hooks; the child's first work runs at once."""
        number = next(self._numbers)
        self.trace.add(self.now, parent.label, "FORKS P%d without fork hooks", number)
        self.faults["fork"] += 1
        child = parent.fork(number)
        self.alive.append(child)
        self.processes.append(child)
        self.current = child
        self.ran.append(child)
        child.app.resume_in_child()
        self.current = None
        return child

    def pause(self, process: SimProcess, length: float) -> None:
        process.paused = True
        self.faults["pause"] += 1
        if length > self.config.lease:
            self.faults["pause longer than the lease"] += 1
        self.trace.add(self.now, process.label, "PAUSED for %.3f s", length)

    def resume(self, process: SimProcess) -> None:
        process.paused = False
        held, process.held = process.held, []
        for _, _, fn, owner, local_due, timer in held:  # in their original order, now
            heapq.heappush(self._heap, (self.now, next(self._sequence), fn, owner, local_due, timer))
        self.trace.add(self.now, process.label, "resumed, %d events were waiting", len(held))

    # -- backend and network -------------------------------------------------------------

    def granted(self, name: str, session_id: str, token: int) -> None:
        self._granted.append(name)
        self.checker.token_granted(name, session_id, token)

    def _on_model_notification(self, notification: Notification) -> None:
        if notification.kind is NotificationKind.HANDED_OVER:
            name, session_id, token = notification.name, notification.session_id, notification.token
            self.trace.add(self.now, "BACKEND", "%s#%d handed over to %s", name, token, session_id)
            self.granted(name, session_id, token)
        self.notify(notification)

    def _expire_on_backend(self) -> None:
        """A backend that expires sessions by itself does so when they are due (not while down)."""
        wait = self.config.renew
        if self.backend_down:
            wait = EXPIRY_WHILE_DOWN  # it expires nothing until it is back
        else:
            self.model.expire_due()
            due = self.model.next_expiry()
            if due is not None:
                wait = min(wait, max(due - self.backend_now(), 0.0) + EXPIRY_LAG)
        self.schedule(self.now + wait, self._expire_on_backend)

    def notify(self, notification: Notification) -> None:
        """Send ``notification`` to every subscribed process once the current step is over."""
        self._notifications.append(notification)

    def _dispatch_notifications(self) -> None:
        # One call's notifications come out of sets in the model: sort them so a seed replays exactly.
        batch = sorted(set(self._notifications), key=lambda n: (n.kind.value, n.name, n.session_id, n.token))
        self._notifications.clear()
        for notification in batch:
            for process in self.alive:
                if not process.backend.hears(notification):
                    continue
                delay = self.network.notification_delay(process)
                if delay is None:
                    continue
                self.schedule(
                    self.now + delay,
                    lambda p=process, n=notification: p.backend.deliver(n),  # type: ignore[misc]
                    owner=process,
                )

    def send_write(self, process: SimProcess, write: Write) -> None:
        delay = self.network.write_delay(process)
        self.schedule(self.now + delay, lambda: self._receive_write(write))

    def _receive_write(self, write: Write) -> None:
        accepted, superseded = self.register.receive(write)
        self.trace.add(
            self.now,
            "REGISTER",
            "%s token %d from %s %s",
            write.name,
            write.token,
            write.writer,
            "accepted" if accepted else "rejected",
        )
        if accepted:
            self.checker.write_judged(write.name, write.token, write.writer, superseded)


def simulate(config: SimulationConfig) -> SimulationResult:
    """Run one seed and return what it found."""
    return World(config).run()
