"""What each simulated process does with its engine: the workload the oracle watches.

* It stands for election on every name of ``config.names`` and, while leader,
  writes to the fenced register (at once when elected, then every write interval).
  Some processes stand twice for each name, as two threads of one process would:
  the engine then serializes two local candidates, and now and then one of them (the
  leader, mostly) steps down (its thread stops, closing its candidacy) and stands again
  a moment later.
* It contends for every name of ``config.lock_names`` through two ``Lock`` objects,
  as two threads of one process would: one try-acquire at a time, a short hold, an
  explicit release or a maximum hold time; writing under the lock too.
* It shares one ``Lock`` between a few threads and one ``AsyncLock`` between a few tasks
  (:mod:`.sharing`), as module-level locks are shared.
* It joins one group, and now and then leaves it and joins again; a resign episode
  makes it close an election it leads and leave the group, then stand and join again
  later.

Stepping down and leaving happen only while faults go on: the calm tail of a run
shows that every name is led and every process a member.

Every write is decided while the term is valid and sent a moment later, so a pause
can fall between the check and the write, as in a real program. The workload runs
on the process's own thread (``SimProcess.call_later``), not on the engine's.
"""

from __future__ import annotations

import contextlib
import random
from typing import TYPE_CHECKING

from ...engine import Election, Lock, Term
from ...errors import LeaseLost
from ...spi import SimbaError
from .register import Write
from .sharing import SharedHandles, blocked

if TYPE_CHECKING:
    from .process import SimProcess

#: Every process joins this group; the oracle checks each live session is a member.
GROUP = "workers"
#: The share of processes that stand twice for each election name.
TWO_CANDIDATES = 0.5
#: At each write of a process that stands twice, the chance that a candidate steps down...
STEP_DOWN = 0.25
#: ... and that it is the one that waits rather than the leader.
WAITER_STEPS_DOWN = 0.3
#: At each write, the chance that the process leaves its group (it joins again at the next one).
LEAVE = 0.03


class Application:
    """The workload of one process."""

    def __init__(self, process: SimProcess) -> None:
        self.process = process
        self.world = process.world
        self.engine = process.engine
        self._random = random.Random(f"{self.world.config.seed}:{process.label}:app")
        self.candidates = 2 if self._random.random() < TWO_CANDIDATES else 1
        self.label = f"{process.label}.main"  # the process's one thread, which runs this workload
        self.elections: dict[str, list[Election]] = {}
        renew = self.world.config.renew
        self.locks: dict[str, list[Lock]] = {
            name: [self.engine.lock(name), self.engine.lock(name, max_hold=renew)]
            for name in self.world.config.lock_names
        }
        #: The term each lock's last acquire returned, until its release: what this thread believes.
        self.held: dict[Lock, Term] = {}
        self.joined = False
        self.sharing = SharedHandles(self)

    def start(self) -> None:
        for name in self.world.config.names:
            self.stand(name)
        self._run()

    def _run(self) -> None:
        """Start the writer and the lock users."""
        self.process.call_later(self._interval(), self._tick)
        for name in self.locks:
            self.process.call_later(self._random.uniform(0.0, 2.0), lambda name=name: self._try_lock(name))  # type: ignore[misc]
        self.sharing.start()

    def resume_in_child(self) -> None:
        """In a child forked from this workload's process: the child's first work, then its own.

        Its first request looks at what it leads, as a web worker's would; the parent's timers
        are the parent's, so the child starts its own.
        """
        self._random = random.Random(f"{self.world.config.seed}:{self.process.label}:app")
        self._tick()
        for name in self.locks:
            self.process.call_later(self._random.uniform(0.0, 2.0), lambda name=name: self._try_lock(name))  # type: ignore[misc]
        self.sharing.resume_in_child()

    def beliefs(self) -> list[Term]:
        """Every term of this process that is valid now, on its own clock."""
        valid = []
        for elections in self.elections.values():
            for election in elections:
                term = election.term
                if term is not None:
                    valid.append(term)
        if self.held:  # the oracle asks after every step: no loop or call for what is not there
            for term in self.held.values():
                if term.is_valid():
                    valid.append(term)
        if self.sharing.used:
            self.sharing.add_beliefs(valid)
        return valid

    def believed(self, name: str) -> list[Term]:
        """The terms on ``name`` this process holds validly now (its handles of that name only)."""
        valid = []
        for election in self.elections.get(name, ()):
            term = election.term
            if term is not None:
                valid.append(term)
        for term in self.held.values():
            if term.name == name and term.is_valid():
                valid.append(term)
        if self.sharing.used:
            for term in self.sharing.beliefs():  # a loop, not a generator: the oracle asks often
                if term.name == name:
                    valid.append(term)
        return valid

    # -- elections ----------------------------------------------------------------------

    def stand(self, name: str) -> None:
        """Stand for ``name`` as many times as this process does; join the group again."""
        standing = self.elections.setdefault(name, [])
        while len(standing) < self.candidates:
            standing.append(self.engine.election(name, on_elected=self._elected))
        self.join_group()

    def resign(self, name: str) -> bool:
        """Close one candidacy on ``name`` (the leader's, if this process leads) and leave the group.

        False when not standing.
        """
        standing = self.elections.get(name, [])
        if not standing:
            return False
        leading = [e for e in standing if e.is_leader]
        election = leading[0] if leading else standing[0]
        standing.remove(election)
        election.close()
        self.leave_group()
        return True

    def _elected(self, term: Term) -> None:
        if term.is_valid():
            self._write(term)

    # -- the writer -----------------------------------------------------------------------

    def _interval(self) -> float:
        return self.world.config.write_interval * self._random.uniform(0.8, 1.2)

    def _tick(self) -> None:
        for elections in self.elections.values():
            for election in elections:
                term = election.term
                if term is not None:
                    self._write(term)
        for locks in self.locks.values():
            for lock in locks:
                if lock.locked():
                    self._write(lock.term)  # type: ignore[arg-type]
        self.join_group()  # a join that failed, or a leave, is followed by a join
        faults_go_on = self.world.now < self.world.calm_from
        if self.candidates > 1 and self._random.random() < STEP_DOWN and faults_go_on:
            self._step_down(waiter=self._random.random() < WAITER_STEPS_DOWN)
        if self._random.random() < LEAVE and faults_go_on:
            self.leave_group()
        self.process.call_later(self._interval(), self._tick)

    def _step_down(self, *, waiter: bool) -> None:
        """The thread of a candidate (the leader, or one that waits) stops; the process stands on."""
        for name, standing in self.elections.items():
            chosen = [e for e in standing if e.is_leader != waiter]
            if chosen:
                standing.remove(chosen[0])
                chosen[0].close()
                pause = self._random.uniform(0.5, 3.0)
                self.process.call_later(pause, lambda name=name: self._stand_again(name))  # type: ignore[misc]
                return

    def _stand_again(self, name: str) -> None:
        if name in self.elections:  # not resigned meanwhile
            self.stand(name)

    def _write(self, term: Term) -> None:
        order = self.world.grants.order_of(term.name, term.session_id, term.token)
        write = Write(term.name, term.token, order, self.process.label)
        think = self._random.uniform(0.0, 0.05)
        self.process.call_later(think, lambda: self.world.send_write(self.process, write))

    # -- locks --------------------------------------------------------------------------

    def _try_lock(self, name: str) -> None:
        lock = self._random.choice(self.locks[name])
        if lock.term is not None and not lock.locked():
            self.held.pop(lock, None)
            with contextlib.suppress(LeaseLost):
                lock.release()  # its term ended without us (lost, maximum hold): forget it
        if lock.term is None and self.engine.session_id is not None and not blocked(self, lock, self.label):
            try:
                term = lock.try_acquire()
            except SimbaError:
                term = None
            if term is not None:
                self.held[lock] = term
                self._write(term)
                hold = self._random.uniform(0.2, 1.5) * self.world.config.renew
                self.process.call_later(hold, lambda: self._unlock(lock, term))
        self.process.call_later(self._random.uniform(0.5, 4.0), lambda: self._try_lock(name))

    def _unlock(self, lock: Lock, term: Term) -> None:
        if lock.term is term:
            self.held.pop(lock, None)
            with contextlib.suppress(LeaseLost):  # ended meanwhile: the release says so
                lock.release()

    # -- groups ---------------------------------------------------------------------------

    def join_group(self) -> None:
        """Join the group once a session exists; the engine rejoins in every later session.

        ``Engine.join`` calls the backend in the caller's thread (no simulated wire delay);
        the engine's own rejoins go through the lanes.
        """
        if self.joined or self.engine.session_id is None:
            return
        try:
            self.engine.join(GROUP, session_wait=0)
        except SimbaError:
            return  # the session is gone or the backend is down: the writer tries again
        self.joined = True

    def leave_group(self) -> None:
        if not self.joined:
            return
        self.joined = False
        with contextlib.suppress(SimbaError):  # a membership left behind ends with its session
            self.engine.leave(GROUP)
