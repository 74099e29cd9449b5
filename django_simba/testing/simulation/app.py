"""What each simulated process does with its engine: the workload the oracle watches.

* It stands for election on every name of ``config.names`` and, while leader,
  writes to the fenced register (at once when elected, then every write interval).
* It contends for every name of ``config.lock_names`` through two ``Lock`` objects,
  as two threads of one process would: one try-acquire at a time, a short hold, an
  explicit release or a maximum hold time; writing under the lock too.
* A resign episode makes it close an election it leads and stand again later.

Every write is decided while the term is valid and sent a moment later, so a pause
can fall between the check and the write, as in a real program.
"""

from __future__ import annotations

import contextlib
import random
from typing import TYPE_CHECKING

from ...engine import Election, Lock, Term
from ...errors import LeaseLost
from ...spi import SimbaError
from .register import Write

if TYPE_CHECKING:
    from .process import SimProcess

#: Every process joins this group; the oracle checks each live session is a member.
GROUP = "workers"


class Application:
    """The workload of one process."""

    def __init__(self, process: SimProcess) -> None:
        self.process = process
        self.world = process.world
        self.engine = process.engine
        self.runtime = process.runtime
        self._random = random.Random(f"{self.world.config.seed}:{process.label}:app")
        self.elections: dict[str, Election] = {}
        renew = self.world.config.renew
        self.locks: dict[str, list[Lock]] = {
            name: [self.engine.lock(name), self.engine.lock(name, max_hold=renew)]
            for name in self.world.config.lock_names
        }
        self.joined = False

    def start(self) -> None:
        for name in self.world.config.names:
            self.stand(name)
        self.runtime.call_later(self._interval(), self._tick)
        for name in self.locks:
            self.runtime.call_later(self._random.uniform(0.0, 2.0), lambda name=name: self._try_lock(name))  # type: ignore[misc]

    def beliefs(self) -> list[Term]:
        """Every term of this process that is valid now, on its own clock."""
        valid = []
        for election in self.elections.values():
            term = election.term
            if term is not None:
                valid.append(term)
        for locks in self.locks.values():
            for lock in locks:
                term = lock.term
                if term is not None and term.is_valid():
                    valid.append(term)
        return valid

    def believed(self, name: str) -> list[Term]:
        """The terms on ``name`` this process holds validly now."""
        return [term for term in self.beliefs() if term.name == name]

    # -- elections ----------------------------------------------------------------------

    def stand(self, name: str) -> None:
        if name not in self.elections:
            self.elections[name] = self.engine.election(name, on_elected=self._elected)

    def resign(self, name: str) -> bool:
        """Close the election on ``name`` (releasing it if leader); False when not standing."""
        election = self.elections.pop(name, None)
        if election is None:
            return False
        election.close()
        return True

    def _elected(self, term: Term) -> None:
        if term.is_valid():
            self._write(term)

    # -- the writer -----------------------------------------------------------------------

    def _interval(self) -> float:
        return self.world.config.write_interval * self._random.uniform(0.8, 1.2)

    def _tick(self) -> None:
        for election in self.elections.values():
            term = election.term
            if term is not None:
                self._write(term)
        for locks in self.locks.values():
            for lock in locks:
                if lock.locked():
                    self._write(lock.term)  # type: ignore[arg-type]
        self.runtime.call_later(self._interval(), self._tick)

    def _write(self, term: Term) -> None:
        order = self.world.grants.order_of(term.name, term.session_id, term.token)
        write = Write(term.name, term.token, order, self.process.label)
        think = self._random.uniform(0.0, 0.05)
        self.runtime.call_later(think, lambda: self.world.send_write(self.process, write))

    # -- locks --------------------------------------------------------------------------

    def _try_lock(self, name: str) -> None:
        lock = self._random.choice(self.locks[name])
        if lock.term is not None and not lock.locked():
            with contextlib.suppress(LeaseLost):
                lock.release()  # its term ended without us (lost, maximum hold): forget it
        if lock.term is None and self.engine.session_id is not None:
            try:
                term = lock.try_acquire()
            except SimbaError:
                term = None
            if term is not None:
                self._write(term)
                hold = self._random.uniform(0.2, 1.5) * self.world.config.renew
                self.runtime.call_later(hold, lambda: self._unlock(lock, term))
        self.runtime.call_later(self._random.uniform(0.5, 4.0), lambda: self._try_lock(name))

    def _unlock(self, lock: Lock, term: Term) -> None:
        if lock.term is term:
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
            return  # the session is gone or the backend is down: try again with the next session
        self.joined = True
