"""Run a command only while this process holds a lock or leads an election (``simba_run``).

Meant for cron jobs installed on several hosts: each host starts the command,
one runs it, the others skip. While the command runs, the engine keeps the
term alive; the command gets the fencing token in ``SIMBA_TOKEN`` (with
``SIMBA_LEASE`` and ``SIMBA_SESSION``) to pass to whatever it writes.

- While waiting for the lock or the leadership, SIGTERM, SIGINT, SIGHUP and
  SIGQUIT end the wait at once: the command is not started, and the exit code
  is 128 + the signal's number, as a shell reports a command a signal ended.
- The command runs in its own process group. SIGTERM, SIGINT, SIGHUP, SIGQUIT,
  SIGUSR1 and SIGUSR2 received meanwhile are forwarded to that group; the lock
  is released once the command has exited, whatever ended it.
- The command must be gone before the term can end, for another host may hold
  the name after that. When renewals fail and less than ``kill_after``
  seconds of the term remain, the command gets SIGTERM, and SIGKILL just
  before the term's local deadline (or ``kill_after`` seconds after SIGTERM,
  if sooner); the exit code is :data:`EXIT_LOST`. If the term is lost while the
  command runs (force-released by an operator, taken over), the command gets
  SIGTERM, then SIGKILL ``kill_after`` seconds later, with the same exit code.
- If this process itself is killed with SIGKILL, the command keeps running
  without the lock once the lease expires: writes that matter should be fenced
  with the token.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from ..engine import EndReason, Engine, EngineObserver, Term
from ..errors import LeaseLost
from ..spi import LeaseInfo, LockTimeout
from .wakeup import Wakeup

logger = logging.getLogger("django_simba.run")

Mode = Literal["lock", "leader"]

#: The term was lost while the command ran, or renewals failed this close to its end; the command
#: was stopped.
EXIT_LOST = 3
#: The command could not be found / was not executable (as in shells).
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
#: SIGKILL goes this long before the term's local deadline, so that the command is gone by then.
KILL_MARGIN = 0.5

FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
#: The signals that stop ``simba_run`` while it waits (the others have nothing to be forwarded to).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What happened. ``ran``: the command was started; ``stopped_by``: a signal ended the wait first."""

    ran: bool
    exit_code: int
    message: str
    token: int | None = None
    holder: LeaseInfo | None = None
    stopped_by: int | None = None

    @property
    def skipped(self) -> bool:
        """Not run because another instance holds the name."""
        return not self.ran and self.stopped_by is None


class _Child:
    """The command's process, and what may stop it (a forwarded signal, a term ending or lost)."""

    def __init__(self, kill_after: float) -> None:
        self.kill_after = kill_after
        self.process: subprocess.Popen[bytes] | None = None
        self.lost: EndReason | None = None
        #: Renewals failed this close to the end of the term: the command was told to stop.
        self.ending = False
        #: A stop signal that arrived before the command started: it is then not started.
        self.interrupted: int | None = None
        #: Set by a stop signal (in its handler: hence no threading.Event), or by the thread that
        #: waited for the term, so that the wait for the lock ends at once.
        self.wake = Wakeup()
        self.exited = threading.Event()
        self._mutex = threading.Lock()

    def started(self, process: subprocess.Popen[bytes]) -> None:
        with self._mutex:
            self.process = process
            lost, interrupted = self.lost, self.interrupted
        if interrupted is not None:
            self._signal_group(interrupted)  # arrived while it was being started
        if lost is not None:
            self._terminate(self.kill_after)

    def term_lost(self, reason: EndReason) -> None:
        """Called on the engine's callback thread."""
        with self._mutex:
            if self.lost is not None or self.exited.is_set():
                return
            self.lost = reason
            started, ending = self.process is not None, self.ending
        if ending:
            return  # already told to stop, with SIGKILL due before the deadline
        logger.warning("django-simba: the term ended while the command ran (%s): stopping it", reason.value)
        if started:
            self._terminate(self.kill_after)

    def term_ending(self, term: Term) -> None:
        """Renewals fail and the term ends within ``kill_after``: stop the command while it is valid."""
        with self._mutex:
            if self.ending or self.lost is not None or self.exited.is_set() or self.process is None:
                return
            self.ending = True
        remaining = term.remaining
        logger.warning(
            "django-simba: renewals of %r are failing and its term ends in %.1f s: stopping the command",
            term.name,
            remaining,
        )
        self._terminate(min(self.kill_after, max(0.0, remaining - KILL_MARGIN)))

    def forward(self, signum: int) -> None:
        """A signal handler (main thread): pass the signal on, or end the wait for the term."""
        if self.process is not None:
            self._signal_group(signum)
        elif signum in STOP_SIGNALS:
            self.interrupted = signum
            self.wake.set()

    def _terminate(self, kill_after: float) -> None:
        self._signal_group(signal.SIGTERM)
        threading.Thread(
            target=self._kill_if_still_running, args=(kill_after,), daemon=True, name="simba-run-kill"
        ).start()

    def _kill_if_still_running(self, kill_after: float) -> None:
        if not self.exited.wait(kill_after):
            logger.warning("django-simba: the command ignored SIGTERM for %.1f s: killing it", kill_after)
            self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        process = self.process
        if process is None or self.exited.is_set():
            return
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(process.pid, signum)


class _RenewalWatch(EngineObserver):
    """Follows the session's renewals while the command runs, and stops it before its term can end."""

    def __init__(self, term: Term, child: _Child) -> None:
        self.term, self.child = term, child
        self.failing = False
        self.stopped = False
        self.changed = threading.Event()

    def keep_alive_done(self, seconds: float, ok: bool) -> None:
        self.failing = not ok
        self.changed.set()

    def run(self) -> None:
        """Wake when the remaining time reaches the grace period or a keep-alive reports, until the exit."""
        grace = self.child.kill_after
        while True:
            self.changed.clear()
            remaining = self.term.remaining
            if self.stopped or remaining <= 0:
                return  # the command is gone, or the term ended (its loss stops the command)
            if self.failing and remaining <= grace:
                self.child.term_ending(self.term)
                return
            self.changed.wait(remaining - grace if remaining > grace else remaining)


@contextmanager
def _watching_renewals(engine: Engine, term: Term, child: _Child) -> Iterator[None]:
    watch = _RenewalWatch(term, child)
    # Replaced, never changed in place: the engine may be going through the list on another thread.
    engine.observers = [*engine.observers, watch]
    thread = threading.Thread(target=watch.run, daemon=True, name="simba-run-watch")
    thread.start()
    try:
        yield
    finally:
        engine.observers = [observer for observer in engine.observers if observer is not watch]
        watch.stopped = True
        watch.changed.set()
        thread.join()


@dataclass(slots=True)
class _Holding:
    term: Term
    release: Callable[[], None]


def run_exclusively(
    argv: Sequence[str],
    name: str,
    *,
    mode: Mode = "lock",
    timeout: float = 0,
    kill_after: float = 10.0,
    engine: Engine | None = None,
) -> RunOutcome:
    """Run ``argv`` while holding ``name`` (``mode="lock"``) or leading it (``mode="leader"``).

    ``timeout``: how long to wait for the lock or the leadership (0: skip at once
    when another instance has it). Raises the backend's errors (BackendUnavailable...)
    when it cannot be asked.
    """
    if not argv:
        raise ValueError("no command to run")
    if engine is None:
        from ..registry import get_engine

        engine = get_engine()
    child = _Child(kill_after)
    # Caught from the start: a stop signal while waiting for the lock must not kill this
    # process without closing its session (the lease would stay taken until it expires).
    with _forwarding_signals(child.forward):
        holding = _take_unless_stopped(engine, name, mode, timeout, child)
        if child.interrupted is not None and holding is None:
            signame = signal.Signals(child.interrupted).name
            message = f"stopped by {signame} while waiting for {name!r}; the command was not started"
            return RunOutcome(False, 128 + child.interrupted, message, stopped_by=child.interrupted)
        if holding is None:
            holder = engine.owner(name)  # raises BackendUnavailable when the backend is what failed
            who = (
                f"held by {holder.metadata or holder.session_id} (token {holder.token})" if holder else "held"
            )
            return RunOutcome(False, 0, f"skipped: {name!r} is {who}", holder=holder)
        try:
            with _watching_renewals(engine, holding.term, child):
                return _run_holding(argv, name, holding.term, child)
        finally:
            child.exited.set()
            with contextlib.suppress(LeaseLost):  # a lost term is already in the outcome
                holding.release()


def _take_unless_stopped(
    engine: Engine, name: str, mode: Mode, timeout: float, child: _Child
) -> _Holding | None:
    """Wait for the term on a helper thread, so that a stop signal (on this thread) ends the wait at once.

    A term that arrives after the wait was given up is released at once.
    """
    outcome: list[_Holding | BaseException | None] = []
    given_up = False
    mutex = threading.Lock()

    def take() -> None:
        try:
            result: _Holding | BaseException | None = _take(engine, name, mode, timeout, child.term_lost)
        except BaseException as error:
            result = error
        with mutex:
            if not given_up:
                outcome.append(result)
                child.wake.set()
                return
        if isinstance(result, _Holding):
            result.release()

    threading.Thread(target=take, daemon=True, name="simba-run-take").start()
    # A signal is handled by this thread between waits: the bound only matters if the kernel gave it
    # to another thread, whose handler runs here at the next wake-up.
    while not child.wake.wait(1.0):
        pass
    with mutex:
        if not outcome:
            given_up = True
            return None
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _run_holding(argv: Sequence[str], name: str, term: Term, child: _Child) -> RunOutcome:
    if child.interrupted is not None:
        code = 128 + child.interrupted
        signame = signal.Signals(child.interrupted).name
        message = f"stopped by {signame} before the command started"
        return RunOutcome(False, code, message, term.token, stopped_by=child.interrupted)
    env = {
        **os.environ,
        "SIMBA_LEASE": name,
        "SIMBA_TOKEN": str(term.token),
        "SIMBA_SESSION": term.session_id,
    }
    try:
        process = subprocess.Popen(list(argv), env=env, process_group=0)
    except FileNotFoundError:
        return RunOutcome(True, EXIT_NOT_FOUND, f"command not found: {argv[0]}", term.token)
    except PermissionError:
        return RunOutcome(True, EXIT_NOT_EXECUTABLE, f"command not executable: {argv[0]}", term.token)
    logger.info("django-simba: running %s under %r (token %d)", argv[0], name, term.token)
    child.started(process)
    code = process.wait()
    child.exited.set()
    if child.ending:
        message = f"renewals of {name!r} failed close to the end of its term; the command was stopped"
        return RunOutcome(True, EXIT_LOST, message, term.token)
    if child.lost is not None:
        message = f"the term of {name!r} ended ({child.lost.value}); the command was stopped"
        return RunOutcome(True, EXIT_LOST, message, term.token)
    exit_code = 128 - code if code < 0 else code
    return RunOutcome(True, exit_code, f"command exited with status {exit_code}", term.token)


def _take(
    engine: Engine, name: str, mode: Mode, timeout: float, on_lost: Callable[[EndReason], None]
) -> _Holding | None:
    if mode == "lock":
        lock = engine.lock(name, on_lost=lambda term, reason: on_lost(reason))
        try:
            held = lock.acquire(timeout)
        except LockTimeout:
            return None
        return _Holding(held, functools.partial(lock.release, held))  # released from another thread
    if mode != "leader":
        raise ValueError(f"mode must be 'lock' or 'leader', not {mode!r}")
    elected = threading.Event()
    releasing = threading.Event()

    def on_revoked(term: Term) -> None:
        if not releasing.is_set():
            on_lost(term.ended or EndReason.TAKEN)

    election = engine.election(name, on_elected=lambda term: elected.set(), on_revoked=on_revoked)
    election.wait_decided(engine.backend.timeout)
    if timeout > 0 and not election.is_leader:
        elected.wait(timeout)
    term = election.term
    if term is None:
        election.close()
        return None

    def resign() -> None:
        releasing.set()
        election.close()

    return _Holding(term, resign)


@contextmanager
def _forwarding_signals(forward: Callable[[int], None]) -> Iterator[None]:
    """Forward the usual stop signals while the command runs (only the main thread can catch them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _signals_held():
        previous = {n: signal.signal(n, lambda signum, frame: forward(signum)) for n in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        with _signals_held():
            for signum, handler in previous.items():
                signal.signal(signum, handler)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold the forwarded signals back while their handlers change, so that one arriving
    meanwhile (a Ctrl+C right after SIGTERM's handler is set) meets the new handlers, not a mix."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def command_line(command: Sequence[str], *, shell: bool = False, manage: bool = False) -> list[str]:
    """The argv to run: the words as given, a ``sh -c`` line, or a management command of this project."""
    words = list(command)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise ValueError("no command given (put it after --)")
    if shell:
        return ["/bin/sh", "-c", " ".join(words)]
    if manage:
        script = sys.argv[0] if sys.argv else ""
        if os.path.basename(script) != "__main__.py" and script.endswith(".py") and os.path.isfile(script):
            return [sys.executable, os.path.abspath(script), *words]  # manage.py
        # django-admin or python -m django: DJANGO_SETTINGS_MODULE is in the environment.
        return [sys.executable, "-m", "django", *words]
    return words
