"""The backend's one pub/sub connection, read by a daemon thread.

The thread owns the connection: it connects, subscribes to every wanted channel,
delivers messages, pings when the line is quiet and reconnects with a jittered
backoff when the connection fails. Other threads only send SUBSCRIBE / UNSUBSCRIBE
on it, under a lock, and only while it is connected; a channel wanted while the
connection is down is subscribed at the next connect.

``live`` is True from the moment every channel wanted at connect time is confirmed
until the connection fails: the engine polls while it is False. After an outage the
thread reports a resync once live again, since messages may have been missed.

On a Redis Cluster the connection goes to one primary (the next one after a failure):
a plain PUBLISH reaches the subscribers of every node, so one connection sees every
release. Sharded pub/sub would need one connection per shard.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ...spi import redact
from ...spi.outage import ConnectionOutage

logger = logging.getLogger("django_simba.backends.redis")

#: A redis-py connection (``redis.connection.AbstractConnection``); redis-py is only partly typed.
Connection = Any

FIRST_BACKOFF = 0.02
MAX_BACKOFF = 2.0
#: A watch waits at most this long for the server's confirmation (a dead line must not stall callers).
MAX_CONFIRMATION_WAIT = 1.0


class SubscriberDown(Exception):
    """The pub/sub connection stopped answering."""


class Subscriber:
    def __init__(
        self,
        connect: Callable[[], Connection],
        on_message: Callable[[str, str], None],
        on_resync: Callable[[], None],
        *,
        timeout: float,
    ) -> None:
        self._connect = connect
        self._on_message = on_message
        self._on_resync = on_resync
        self._timeout = timeout
        self._ping_every = max(0.2, min(timeout, 2.0))
        self._lock = threading.Lock()
        self._wanted: set[str] = set()
        self._confirmed: dict[str, threading.Event] = {}
        self._conn: Connection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = False
        #: Server-side id of the current connection (CLIENT ID), for tests and operators.
        self.client_id: int | None = None
        #: How many times the connection was (re)established.
        self.connections = 0
        #: An outage in two lines (and a reminder every five minutes), not one per reconnection attempt.
        self._outage = ConnectionOutage(logger, "the Redis pub/sub connection")

    @property
    def live(self) -> bool:
        return self._live

    @property
    def channels(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._wanted)

    # -- control (any thread) ---------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name="simba-redis-pubsub", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            stop, thread, conn = self._stop, self._thread, self._conn
            self._thread = self._conn = None  # nobody sends on it any more
            stop.set()
        if conn is not None:
            conn.disconnect()  # wakes the reader blocked on the socket
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._timeout + 1)
        self._live = False

    def watch(self, channel: str) -> None:
        """Subscribe to ``channel``; while connected, wait (bounded) until the server confirmed it."""
        with self._lock:
            if channel in self._wanted:
                return
            self._wanted.add(channel)
            confirmed = self._confirmed.setdefault(channel, threading.Event())
            sent = self._send("SUBSCRIBE", channel)
        if sent:
            confirmed.wait(min(self._timeout, MAX_CONFIRMATION_WAIT))

    def unwatch(self, channel: str) -> None:
        with self._lock:
            if channel not in self._wanted:
                return
            self._wanted.discard(channel)
            self._confirmed.pop(channel, None)
            self._send("UNSUBSCRIBE", channel)

    def _send(self, *args: str) -> bool:
        """Send on the live connection (lock held); a failure is left to the reader to notice."""
        if self._conn is None:
            return False
        try:
            self._conn.send_command(*args, check_health=False)
            return True
        except Exception as error:
            logger.debug("django-simba: pub/sub send failed: %s", error)
            return False

    # -- the reader thread ----------------------------------------------------------------

    def _run(self, stop: threading.Event) -> None:
        failures = 0
        outage = False
        while not stop.is_set():
            opened = self._open()
            if opened is None:
                failures += 1
                outage = True
                stop.wait(_backoff(failures))
                continue
            conn: Connection = opened
            try:
                self._serve(conn, stop, resync=outage)
                failures = 0
            except Exception as error:
                if not stop.is_set():
                    self._failed("lost", error)
            finally:
                with self._lock:
                    if self._conn is conn:  # else stop() already took it away
                        self._live = False
                        self._conn = None
                conn.disconnect()
            outage = True
            if not stop.is_set():
                failures += 1
                stop.wait(_backoff(failures))

    def _open(self) -> Connection | None:
        """A connected connection whose CLIENT ID is known, or None (logged) when that failed."""
        conn: Connection | None = None
        try:
            conn = self._connect()
            conn.connect()
            conn.send_command("CLIENT", "ID")
            self.client_id = int(conn.read_response())
            return conn
        except Exception as error:
            if conn is not None:
                conn.disconnect()
            self._failed("failed", error)
            return None

    def _failed(self, how: str, error: BaseException) -> None:
        self._outage.failed(f"Redis pub/sub connection {how} ({redact(error)}); the engine polls meanwhile")

    def _serve(self, conn: Connection, stop: threading.Event, *, resync: bool) -> None:
        with self._lock:
            if stop.is_set():
                return
            self._conn = conn
            self.connections += 1
            pending = set(self._wanted)
            if pending:
                conn.send_command("SUBSCRIBE", *sorted(pending), check_health=False)
        if not pending:
            self._go_live(resync)
        last_heard = time.monotonic()
        ping_sent: float | None = None
        while not stop.is_set():
            if conn.can_read(timeout=self._ping_every):
                reply = conn.read_response()
                last_heard = time.monotonic()
                ping_sent = None
                if self._handle(reply, pending) and not self._live and not pending:
                    self._go_live(resync)
                continue
            now = time.monotonic()
            if ping_sent is not None and now - ping_sent > self._timeout:
                raise SubscriberDown(f"no answer to PING within {self._timeout:g} s")
            if ping_sent is None and now - last_heard >= self._ping_every:
                with self._lock:
                    if self._conn is not conn:
                        return  # stopped
                    conn.send_command("PING", check_health=False)
                ping_sent = now

    def _handle(self, reply: Any, pending: set[str]) -> bool:
        """Deliver a message or record a confirmation; True when it confirmed a subscription."""
        if not isinstance(reply, list) or len(reply) < 2:
            return False  # +PONG outside subscribed mode
        kind, channel = str(reply[0]), str(reply[1])
        if kind == "message" and len(reply) >= 3:
            self._on_message(channel, str(reply[2]))
        elif kind == "subscribe":
            pending.discard(channel)
            with self._lock:
                event = self._confirmed.get(channel)
            if event is not None:
                event.set()
            return True
        return False

    def _go_live(self, resync: bool) -> None:
        self._live = True
        self._outage.succeeded()
        if resync:
            self._on_resync()


def _backoff(failures: int) -> float:
    ceiling = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** min(failures, 10))
    return random.uniform(ceiling / 2, ceiling)
