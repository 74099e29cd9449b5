"""PostgreSQL LISTEN: one connection per process turns NOTIFY payloads into notifications.

Releases (and closes, purges, forced releases) send ``released:<name>`` on the
``simba`` channel; joins and leaves send ``group:<name>``. A daemon thread holds
the listening connection, reconnects with a backoff when it breaks, and reports
``RESYNC`` after a reconnect, since notifications sent meanwhile were lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .dialects.postgresql import CHANNEL
from .pool import Link
from .watchdog import Watchdog

logger = logging.getLogger(__name__)

FIRST_RETRY = 0.05
LAST_RETRY = 5.0


class PostgresListener:
    """The listening connection and its thread; ``live`` while it is connected and listening."""

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
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._link: Link | None = None
        self._live = False

    @property
    def live(self) -> bool:
        return self._live

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name="simba-pg-listener", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            thread, self._thread = self._thread, None
            link = self._link
        if link is not None:
            link.interrupt()  # wakes the thread from its wait for notifications
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout + 5)

    def after_fork(self) -> None:
        """The parent's thread is gone and its connection is not ours: forget both."""
        if self._link is not None:
            self._link.forget()
        self._reset()

    # -- the thread -------------------------------------------------------------------

    def _run(self, stop: threading.Event) -> None:
        retry = FIRST_RETRY
        listened_before = False
        while not stop.is_set():
            link: Link | None = None
            try:
                link = self._connect()
                with self._watchdog.guard(self._timeout, link.interrupt):
                    link.raw.execute(f"LISTEN {CHANNEL}")
                with self._lock:
                    if stop.is_set():
                        break
                    self._link, self._live = link, True
                if listened_before:
                    self._resync()
                listened_before = True
                retry = FIRST_RETRY
                self._listen(link, stop)
            except Exception as error:
                if not stop.is_set():
                    logger.warning("PostgreSQL notifications interrupted (%s); reconnecting", error)
            finally:
                with self._lock:
                    self._link, self._live = None, False
                if link is not None:
                    link.close()
            stop.wait(retry)
            retry = min(retry * 2, LAST_RETRY)

    def _listen(self, link: Link, stop: threading.Event) -> None:
        raw = link.raw
        while not stop.is_set():
            idle = True
            for notification in raw.notifies(timeout=self._timeout):
                idle = False
                self._deliver(notification.payload)
            if idle and not stop.is_set():
                # A silent network must not look like a quiet channel: ping within a deadline.
                with self._watchdog.guard(self._timeout, link.interrupt):
                    raw.execute("SELECT 1")
