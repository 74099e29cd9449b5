"""PostgreSQL LISTEN: one connection per process turns NOTIFY payloads into notifications.

Every lease name and group has a channel of its own (see ``postgresql``),
and the connection listens only on the channels of what this process watches:
releases of names nobody here waits for never reach the process. A daemon thread
holds the listening connection, changes its channels when asked (a pipe wakes it
from its wait), reconnects with a backoff when it breaks, and reports ``RESYNC``
after a reconnect, since notifications sent meanwhile were lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable

from ...spi import redact
from ...spi.outage import ConnectionOutage
from .pool import Link
from .watchdog import Watchdog

logger = logging.getLogger(__name__)

FIRST_RETRY = 0.05
LAST_RETRY = 5.0


class PostgresListener:
    """The listening connection and its thread; ``live`` while it is connected and listening.

    ``want(channel, listen)`` adds or removes a channel and returns a ticket;
    ``wait_applied(ticket)`` returns once the server listens on them (or the
    connection is down: then they are listened on when it comes back).
    """

    def __init__(
        self,
        connect: Callable[[], Link],
        deliver: Callable[[str], None],
        resync: Callable[[], None],
        *,
        timeout: float,
        watchdog: Watchdog,
    ) -> None:
        self._connect = connect
        self._deliver = deliver
        self._resync = resync
        self._timeout = timeout
        self._watchdog = watchdog
        self._wanted: set[str] = set()  # kept through a fork: the child watches on
        self._reset()

    def _reset(self) -> None:
        self._condition = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._link: Link | None = None
        self._live = False
        self._requested = 0  # tickets handed out by want()
        self._applied = 0  # the last ticket whose channels the server listens on
        self._pipe: tuple[int, int] | None = None  # wakes the thread; open while it runs
        #: An outage in two lines (and a reminder every five minutes), not one per reconnection attempt.
        self._outage = ConnectionOutage(logger, "the PostgreSQL LISTEN connection")

    @property
    def live(self) -> bool:
        return self._live

    # -- channels ---------------------------------------------------------------------

    def want(self, channel: str, listen: bool) -> int:
        """Listen on ``channel`` from now on (or stop); the ticket to wait for."""
        with self._condition:
            if listen:
                self._wanted.add(channel)
            else:
                self._wanted.discard(channel)
            self._requested += 1
            ticket = self._requested
        self._wake()
        return ticket

    def forget_channels(self) -> None:
        """Listen on nothing (the next connection; a stopped listener's state)."""
        with self._condition:
            self._wanted.clear()
            self._requested += 1

    def wait_applied(self, ticket: int) -> None:
        """Wait (at most the timeout) until the server listens on the channels of ``ticket``."""
        deadline = time.monotonic() + self._timeout
        with self._condition:
            while self._live and self._applied < ticket:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._condition.wait(remaining)

    def _wake(self) -> None:
        # Under the lock stop() closes the pipe with: a closed descriptor's number may be reused.
        with self._condition:
            if self._pipe is not None:
                with contextlib.suppress(BlockingIOError):  # a wake-up is pending already
                    os.write(self._pipe[1], b"\0")

    # -- life -------------------------------------------------------------------------

    def start(self) -> None:
        with self._condition:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = threading.Event()
            if self._pipe is None:
                self._pipe = _nonblocking_pipe()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop, self._pipe[0]), name="simba-pg-listener", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        with self._condition:
            self._stop.set()
            thread, self._thread = self._thread, None
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout + 5)
        with self._condition:
            pipe, self._pipe = self._pipe, None
        _close(pipe)

    def after_fork(self) -> None:
        """The parent's thread, connection and pipe are not ours: forget them."""
        if self._link is not None:
            self._link.forget()
        _close(self._pipe)  # our copies only: the parent keeps its own
        self._reset()

    # -- the thread -------------------------------------------------------------------

    def _run(self, stop: threading.Event, wake: int) -> None:
        retry = FIRST_RETRY
        listened_before = False
        while not stop.is_set():
            link: Link | None = None
            try:
                link = self._connect()
                listening = self._apply(link, frozenset(), live=False)
                with self._condition:
                    if stop.is_set():
                        break
                    self._link, self._live = link, True
                self._outage.succeeded()
                if listened_before:
                    self._resync()
                listened_before = True
                retry = FIRST_RETRY
                self._listen(link, listening, stop, wake)
            except Exception as error:
                if not stop.is_set():
                    said = " ".join(redact(error).split())  # libpq's messages run over three lines
                    self._outage.failed(
                        f"PostgreSQL notifications interrupted ({said}); the engine polls meanwhile"
                    )
            finally:
                with self._condition:
                    self._link, self._live = None, False
                    self._condition.notify_all()
                if link is not None:
                    link.close()
            stop.wait(retry)
            retry = min(retry * 2, LAST_RETRY)

    def _apply(self, link: Link, listening: frozenset[str], *, live: bool = True) -> frozenset[str]:
        """Bring the connection's channels to the wanted ones; returns what it now listens on."""
        import psycopg

        with self._condition:
            wanted, ticket = frozenset(self._wanted), self._requested
        commands = [f'LISTEN "{channel}"' for channel in wanted - listening]
        commands += [f'UNLISTEN "{channel}"' for channel in listening - wanted]
        if commands:
            guard = self._watchdog.guard(self._timeout, link.interrupt)
            with guard, psycopg.ClientCursor(link.raw) as cursor:
                cursor.execute(";\n".join(commands))
        with self._condition:
            self._applied = ticket
            if live:
                self._condition.notify_all()
        return wanted

    def _listen(self, link: Link, listening: frozenset[str], stop: threading.Event, wake: int) -> None:
        raw = link.raw
        socket = raw.fileno()
        while not stop.is_set():
            if self._applied < self._requested:
                listening = self._apply(link, listening)
            # Also what arrived while a command ran (psycopg keeps those for notifies()).
            for notification in raw.notifies(timeout=0):
                self._deliver(notification.payload)
            ready, _, _ = select.select([socket, wake], [], [], self._timeout)
            if wake in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 4096)
            elif not ready and not stop.is_set():
                # A silent network must not look like a quiet channel: ping within a deadline.
                with self._watchdog.guard(self._timeout, link.interrupt):
                    raw.execute("SELECT 1")


def _nonblocking_pipe() -> tuple[int, int]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    return read, write


def _close(pipe: tuple[int, int] | None) -> None:
    for descriptor in pipe or ():
        with contextlib.suppress(OSError):
            os.close(descriptor)
