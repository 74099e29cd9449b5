"""Several callers sharing one handle: threads on one ``Lock``, tasks on one ``AsyncLock``.

Each process holds two shared handles, as an application holds module-level locks: a
:class:`CallerLock` on ``config.thread_shared`` used by a few simulated threads (the
process's main thread among them), and an ``AsyncLock`` on ``config.task_shared`` used by a
few tasks on the process's own event loop (:mod:`.loop`). Both have a maximum hold shorter
than some holds, so terms end by their maximum hold while their caller is still inside its
block, and the next caller is granted meanwhile; the ``force release`` episode ends them as
an operator would; pauses and network faults end them at their deadline. A fork copies the
handles as they are: in the child only the forking (main) thread goes on, with what it held
(it either releases it or starts over without releasing), beside new threads and tasks.

The invariants this adds, checked as callers act:

* a caller's term ends ``released`` only by that caller's own release (``RELEASED_BY_ANOTHER``);
* a release reports its own caller's term: returning means that term was released now,
  ``LeaseLost`` names that term, and a caller that holds a term never hears "not held"
  (``RELEASE_MISREPORTED``);
* a caller never meets a lock taken inside the handle, as another caller's holding would
  leave it: in a world of one thread that call would block for ever, and in a real process
  it waits on another caller's block past its own timeout, or, in a forked child, on a
  holding of the parent's for ever (``CALLER_BLOCKED``);
* a caller that holds nothing is never refused as if it held (``LockHeld``), in a forked child
  neither (``REFUSED_FOR_ANOTHER``).
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import TYPE_CHECKING, Any

from ...engine import AsyncLock, EndReason, Lock, Term
from ...errors import LeaseLost, LeaseNotHeld, LockHeld, LockTimeout
from ...spi import SimbaError
from .loop import SimLoop

if TYPE_CHECKING:
    from .app import Application
    from .world import World

RELEASED_BY_ANOTHER = "a caller's term released by another caller"
RELEASE_MISREPORTED = "a release that misreported its caller's own term"
CALLER_BLOCKED = "a caller blocked on another caller's holding"
REFUSED_FOR_ANOTHER = "a caller refused for a holding not its own"
UNEXPECTED_ERROR = "a caller's call raised what it never should"

#: Simulated threads on the shared lock (the main thread and others), and tasks on the shared alock.
THREADS = 2
TASKS = 2
#: Each handle's maximum hold, and the range of holds, as fractions of the renew interval: about
#: half the holds outlast the maximum.
MAX_HOLD = 0.6
HOLDS = (0.2, 1.2)
#: The pause between a caller's turns, and the longest a task waits for its turn, in seconds. The
#: main thread takes its turns often (a fork then mostly finds it holding), the others seldom (cost).
MAIN_GAPS = (1.0, 3.0)
GAPS = (8.0, 20.0)
LONGEST_WAIT = 4.0
#: The share of processes whose threads and tasks use the shared handles (the others leave them be).
SHARING = 0.25
#: The chance that a forked child's main thread starts over without releasing what it held.
STARTS_OVER = 0.5

_LOCK_TYPE = type(threading.Lock())


class CallerLock(Lock):
    """A ``Lock`` told which simulated thread calls it: the world runs every thread in one."""

    calling: object = None

    def _caller(self) -> object:  # type: ignore[override]
        return self.calling


class Caller:
    """One simulated thread or task using a shared handle, and the term its acquire returned."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.term: Term | None = None
        self.releasing: Term | None = None  # the term its release is giving back now

    def __repr__(self) -> str:
        return f"<Caller {self.label} {self.term!r}>"


class SharedHandles:
    """The shared handles of one process's workload, and their callers."""

    def __init__(self, app: Application) -> None:
        self.app = app
        process = app.process
        config, engine = process.world.config, process.engine
        hold = MAX_HOLD * config.renew
        self.lock = CallerLock(engine, config.thread_shared, max_hold=hold)
        self.alock = AsyncLock(engine, config.task_shared, max_hold=hold)
        label = process.label
        self.threads = [Caller(f"{label}.main")] + [Caller(f"{label}.t{n}") for n in range(1, THREADS)]
        self.tasks = [Caller(f"{label}.task{n}") for n in range(1, TASKS + 1)]
        self._random = random.Random(f"{config.seed}:{label}:sharing")
        self.used = self._random.random() < SHARING
        self.loop = SimLoop(app.process)

    @property
    def world(self) -> World:
        return self.app.process.world

    def start(self) -> None:
        if not self.used:
            return
        for caller in self.threads:
            self._next_turn(caller, self._gap(caller))
        for caller in self.tasks:
            self.loop.create_task(self._task(caller))

    def resume_in_child(self) -> None:
        """In a forked child: the main thread goes on with what it held; the rest is new."""
        world, label = self.world, self.app.process.label
        main = self.threads[0]
        if main.term is not None and main.term.ended is None:
            world.faults["fork while a shared handle is held"] += 1
        self._random = random.Random(f"{world.config.seed}:{label}:sharing")
        if main.term is not None and self._random.random() < STARTS_OVER:
            main.term = None  # its request starts afresh: the parent's holding must not stand in its way
            world.faults["forked child starts over on a shared handle"] += 1
        self.threads = [main] + [Caller(f"{label}.t{n}") for n in range(1, THREADS)]
        self.tasks = [Caller(f"{label}.task{n}") for n in range(1, TASKS + 1)]
        self.loop = SimLoop(self.app.process)
        self.start()

    def close(self) -> None:
        """The run is over: close the loop (a crashed process's tasks never finish)."""
        self.loop.close()

    def beliefs(self) -> list[Term]:
        """The terms the callers hold validly now."""
        valid: list[Term] = []
        self.add_beliefs(valid)
        return valid

    def add_beliefs(self, valid: list[Term]) -> None:
        """Add the terms the callers hold validly now to ``valid`` (the oracle asks at every event)."""
        if not self.used:
            return
        for caller in self.threads:
            term = caller.term
            if term is not None and term.is_valid():
                valid.append(term)
        for caller in self.tasks:
            term = caller.term
            if term is not None and term.is_valid():
                valid.append(term)

    # -- threads -----------------------------------------------------------------------------

    def _gap(self, caller: Caller | None = None) -> float:
        return self._random.uniform(*(MAIN_GAPS if caller is self.threads[0] else GAPS))

    def _hold(self) -> float:
        return self._random.uniform(*HOLDS) * self.world.config.renew

    def _next_turn(self, caller: Caller, delay: float) -> None:
        self.app.process.call_later(delay, lambda: self._turn(caller))

    def _turn(self, caller: Caller) -> None:
        """A thread's turn: release what it holds, or try to acquire."""
        if caller not in self.threads:
            return  # a thread of the parent: gone in this child
        if caller.term is not None:
            self._release_in_thread(caller)
            self._next_turn(caller, self._gap(caller))
            return
        term = self._try_in_thread(caller)
        if term is not None:
            self._granted(caller, term)
        self._next_turn(caller, self._hold() if term is not None else self._gap(caller))

    def _try_in_thread(self, caller: Caller) -> Term | None:
        lock = self.lock
        if self.app.engine.session_id is None or self._blocked(lock, caller):
            return None  # no session: a try would wait for one, and this world has one thread
        lock.calling = caller
        try:
            return lock.try_acquire()
        except LockHeld as error:
            self._violate(REFUSED_FOR_ANOTHER, f"{caller.label} holds nothing, yet: {error}")
        except SimbaError:
            pass
        except Exception as error:
            self._violate(UNEXPECTED_ERROR, f"{caller.label}'s try_acquire raised {error!r}")
        finally:
            lock.calling = None
        return None

    def _release_in_thread(self, caller: Caller) -> None:
        term = caller.term
        assert term is not None
        self._before_release(caller, term)
        self.lock.calling = caller
        try:
            self.lock.release()
            outcome: BaseException | None = None
        except Exception as error:  # judged below
            outcome = error
        finally:
            self.lock.calling = None
        self._judge_release(caller, term, outcome)

    # -- tasks -------------------------------------------------------------------------------

    async def _task(self, caller: Caller) -> None:
        try:
            await self._task_turns(caller)
        except Exception as error:  # its own code failed: nothing else would report it
            self._violate(UNEXPECTED_ERROR, f"{caller.label} failed: {error!r}")

    async def _task_turns(self, caller: Caller) -> None:
        """A task's life: wait for its turn (in line, with a timeout), hold, release, again."""
        lock = self.alock
        while True:
            await asyncio.sleep(self._gap())
            if self._blocked(lock, caller):
                continue
            try:
                term = await lock.acquire(self._random.uniform(0.0, LONGEST_WAIT))
            except LockHeld as error:
                self._violate(REFUSED_FOR_ANOTHER, f"{caller.label} holds nothing, yet: {error}")
                continue
            except (LockTimeout, SimbaError):
                continue
            except Exception as error:
                self._violate(UNEXPECTED_ERROR, f"{caller.label}'s acquire raised {error!r}")
                continue
            self._granted(caller, term)
            await asyncio.sleep(self._hold())
            self._before_release(caller, term)
            try:
                await lock.release()
                outcome: BaseException | None = None
            except Exception as error:
                outcome = error
            self._judge_release(caller, term, outcome)

    # -- what every caller does, and the invariants ----------------------------------------------

    def _granted(self, caller: Caller, term: Term) -> None:
        caller.term = term
        self.world.faults["shared handle: term granted"] += 1
        self.app._write(term)
        self._check_terms()

    @staticmethod
    def _before_release(caller: Caller, term: Term) -> None:
        caller.releasing = term

    def _judge_release(self, caller: Caller, term: Term, outcome: BaseException | None) -> None:
        """The release of ``term`` by ``caller`` said ``outcome``: it must be about that term."""
        caller.term = caller.releasing = None
        faults = self.world.faults
        if outcome is None:
            if term.ended is not EndReason.RELEASED:
                self._violate(
                    RELEASE_MISREPORTED,
                    f"{caller.label}'s release returned, but its {term!r} had ended ({term.ended})",
                )
        elif isinstance(outcome, LeaseLost):
            faults[f"shared handle: term ended by {outcome.reason.value}"] += 1
            if outcome.term is not term:
                self._violate(
                    RELEASE_MISREPORTED, f"{caller.label}'s release reported {outcome.term!r}, not {term!r}"
                )
        elif isinstance(outcome, LeaseNotHeld):
            self._violate(RELEASE_MISREPORTED, f"{caller.label} held {term!r}, its release said: {outcome}")
        elif not isinstance(outcome, SimbaError):
            self._violate(UNEXPECTED_ERROR, f"{caller.label}'s release raised {outcome!r}")
        self._check_terms()

    def _check_terms(self) -> None:
        """A caller's term ends ``released`` only by its own release."""
        for caller in (*self.threads, *self.tasks):
            term = caller.term
            if term is not None and term.ended is EndReason.RELEASED and caller.releasing is not term:
                self._violate(
                    RELEASED_BY_ANOTHER,
                    f"{caller.label}'s {term!r} was released while it was inside its block",
                    (RELEASED_BY_ANOTHER, term.name, term.session_id, term.token),
                )

    def _blocked(self, handle: object, caller: Caller) -> bool:
        return blocked(self.app, handle, caller.label)

    def _violate(self, kind: str, detail: str, key: tuple[Any, ...] | None = None) -> None:
        self.world.checker.violate(kind, detail, key)


def blocked(app: Application, handle: object, who: str) -> bool:
    """Whether ``who`` would block on a lock taken inside ``handle`` (the call is then skipped).

    Between two events of this one-thread world, a lock held is held across a caller's block:
    the call would block the world for ever (in a real process: wait on another caller's block,
    past its own timeout, or in a forked child on a holding of its parent's, for ever).
    """
    for value in vars(handle).values():
        if type(value) is _LOCK_TYPE and value.locked():
            process = app.process
            where = " (in a forked child)" if process.parent is not None else ""
            process.world.checker.violate(
                CALLER_BLOCKED,
                f"{who} would block on a lock held inside {handle!r}{where}",
                (CALLER_BLOCKED, id(handle), who),
            )
            return True
    return False


def force_release(world: World) -> None:
    """An operator force-releases a shared handle's name held on the backend (the admin's action).

    The holder may trust its term until its engine hears of it (a keep-alive, its release): the
    oracle excuses that term from "two leaders" and "a superseded leader", never from fencing.
    """
    names = [world.config.thread_shared, world.config.task_shared]
    held = [info for info in (world.model.owner(name) for name in names) if info is not None]
    if not held:
        return
    info = world.rng.choice(held)
    if world.model.force_release(info.name):
        world.checker.revoke(info.name, info.session_id, info.token)
        world.faults["force release"] += 1
        world.trace.add(
            world.now, "OPERATOR", "force-releases %s#%d of %s", info.name, info.token, info.session_id
        )
