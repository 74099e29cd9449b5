"""Run a command only while this process holds a lock or leads an election (``simba_run``).

Meant for cron jobs installed on several hosts: each host starts the command,
one runs it, the others skip. While the command runs, the engine keeps the
term alive; the command gets the fencing token in ``SIMBA_TOKEN`` (with
``SIMBA_LEASE`` and ``SIMBA_SESSION``) to pass to whatever it writes.

- The command runs in its own process group. SIGTERM, SIGINT, SIGHUP, SIGQUIT,
  SIGUSR1 and SIGUSR2 received meanwhile are forwarded to that group; the lock
  is released once the command has exited, whatever ended it.
- If the term is lost while the command runs (taken over after the session
  could not be kept alive, or force-released by an operator), the command gets
  SIGTERM, then SIGKILL ``kill_after`` seconds later, and the exit code is
  :data:`EXIT_LOST`.
- If this process itself is killed with SIGKILL, the command keeps running
  without the lock once the lease expires: writes that matter should be fenced
  with the token.
"""

from __future__ import annotations

import contextlib
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

from .engine import EndReason, Engine, Term
from .errors import LeaseLost
from .spi import LeaseInfo, LockTimeout

logger = logging.getLogger("django_simba.run")

Mode = Literal["lock", "leader"]

#: The lease or leadership was lost while the command ran; the command was terminated.
EXIT_LOST = 3
#: The command could not be found / was not executable (as in shells).
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126

FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What happened: ``ran`` False means skipped because another instance holds the name."""

    ran: bool
    exit_code: int
    message: str
    token: int | None = None
    holder: LeaseInfo | None = None


class _Child:
    """The command's process, and what may stop it (a forwarded signal, a lost term)."""

    def __init__(self, kill_after: float) -> None:
        self.kill_after = kill_after
        self.process: subprocess.Popen[bytes] | None = None
        self.lost: EndReason | None = None
        #: A stop signal that arrived before the command started: it is then not started.
        self.interrupted: int | None = None
        self.exited = threading.Event()
        self._mutex = threading.Lock()

    def started(self, process: subprocess.Popen[bytes]) -> None:
        with self._mutex:
            self.process = process
            lost, interrupted = self.lost, self.interrupted
        if interrupted is not None:
            self._signal_group(interrupted)  # arrived while it was being started
        if lost is not None:
            self._terminate()

    def term_lost(self, reason: EndReason) -> None:
        """Called on the engine's callback thread."""
        with self._mutex:
            if self.lost is not None or self.exited.is_set():
                return
            self.lost = reason
            started = self.process is not None
        logger.warning("django-simba: the term ended while the command ran (%s): stopping it", reason.value)
        if started:
            self._terminate()

    def forward(self, signum: int) -> None:
        """A signal handler (main thread): pass the signal on, or remember it until the start."""
        if self.process is None:
            self.interrupted = signum
        else:
            self._signal_group(signum)

    def _terminate(self) -> None:
        self._signal_group(signal.SIGTERM)
        threading.Thread(target=self._kill_if_still_running, daemon=True, name="simba-run-kill").start()

    def _kill_if_still_running(self) -> None:
        if not self.exited.wait(self.kill_after):
            logger.warning("django-simba: the command ignored SIGTERM for %s s: killing it", self.kill_after)
            self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        process = self.process
        if process is None or self.exited.is_set():
            return
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(process.pid, signum)


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
        from .registry import get_engine

        engine = get_engine()
    child = _Child(kill_after)
    # Caught from the start: a stop signal while waiting for the lock must not kill this
    # process without closing its session (the lease would stay taken until it expires).
    with _forwarding_signals(child.forward):
        holding = _take(engine, name, mode, timeout, child.term_lost)
        if holding is None:
            holder = engine.owner(name)  # raises BackendUnavailable when the backend is what failed
            who = (
                f"held by {holder.metadata or holder.session_id} (token {holder.token})" if holder else "held"
            )
            return RunOutcome(False, 0, f"skipped: {name!r} is {who}", holder=holder)
        try:
            return _run_holding(argv, name, holding.term, child)
        finally:
            child.exited.set()
            with contextlib.suppress(LeaseLost):  # a lost term is already in the outcome
                holding.release()


def _run_holding(argv: Sequence[str], name: str, term: Term, child: _Child) -> RunOutcome:
    if child.interrupted is not None:
        code = 128 + child.interrupted
        return RunOutcome(True, code, f"interrupted by signal {child.interrupted} before the command started")
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
            return _Holding(lock.acquire(timeout), lock.release)
        except LockTimeout:
            return None
    if mode != "leader":
        raise ValueError(f"mode must be 'lock' or 'leader', not {mode!r}")
    elected = threading.Event()
    releasing = threading.Event()

    def on_revoked(term: Term) -> None:
        if not releasing.is_set():
            on_lost(term.ended or EndReason.LOST)

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
    previous = {
        signum: signal.signal(signum, lambda signum, frame: forward(signum)) for signum in FORWARDED_SIGNALS
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
