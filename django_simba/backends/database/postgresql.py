"""The PostgreSQL flavours of the database backend: listening (LISTEN/NOTIFY) and polled."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from ...spi import DEFAULT_TIMEOUT, ConfigurationError, Notification, NotificationKind, NotificationListener
from .backend import DatabaseBackend, _autocommit
from .dialects.postgresql import GROUP_PREFIX, RELEASED_PREFIX, group_channel, lease_channel
from .options import parse_options

logger = logging.getLogger(__name__)


class PolledPostgresqlBackend(DatabaseBackend):
    """PostgreSQL through a pooler in transaction mode, with no direct connection to LISTEN on
    (``listen``): LISTEN cannot work through the pooler, so the engine polls, as on MySQL.

    Its releases send no NOTIFY either: PostgreSQL commits notifying transactions one at a
    time, which would cap a fleet's releases at one per commit flush. A process of the same
    fleet that does listen learns of them at its next retry instead.
    """

    vendor = "postgresql"


class PostgresqlBackend(DatabaseBackend):
    """PostgreSQL 14+: releases and group changes arrive through LISTEN/NOTIFY.

    The listening connection goes to the alias, or to ``listen``'s settings merged over the
    alias's (a direct connection, when the alias goes through PgBouncer).
    """

    vendor = "postgresql"
    notifies = True

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(options, timeout=timeout)
        from .listener import PostgresListener

        parsed = parse_options(self.options)
        if parsed.transaction_pooling and parsed.listen is None:
            raise ConfigurationError(
                "LISTEN cannot work through a pooler in transaction mode: give the option 'listen' (a"
                " direct connection), or build DatabaseBackend, which then polls"
            )
        listen = parsed.listen or {}

        def listen_settings() -> dict[str, Any]:
            # Read at every connect: the alias may point elsewhere now (a test database).
            merged = {**self._settings, **listen}
            merged["OPTIONS"] = {**self._settings["OPTIONS"], **listen.get("OPTIONS", {})}
            return merged

        self._subscribers: list[NotificationListener] = []
        self._watched_leases: set[str] = set()
        self._watched_groups: set[str] = set()
        self._watch_lock = threading.Lock()
        self._listener = PostgresListener(
            # LISTEN and a ping are all it sends: nothing to prepare or set.
            lambda: self._open_link(listen_settings(), _autocommit),
            self._on_payload,
            lambda: self._publish(Notification(NotificationKind.RESYNC)),
            timeout=self.timeout,
            watchdog=self._watchdog,
        )

    def subscribe(self, listener: NotificationListener) -> None:
        with self._watch_lock:
            self._subscribers.append(listener)
        self._listener.start()

    def watch_lease(self, name: str) -> None:
        self._watch(self._watched_leases, name, lease_channel(name), add=True)

    def unwatch_lease(self, name: str) -> None:
        self._watch(self._watched_leases, name, lease_channel(name), add=False)

    def watch_group(self, group: str) -> None:
        self._watch(self._watched_groups, group, group_channel(group), add=True)

    def unwatch_group(self, group: str) -> None:
        self._watch(self._watched_groups, group, group_channel(group), add=False)

    def _watch(self, watched: set[str], name: str, channel: str, *, add: bool) -> None:
        """Change what is watched; a new watch returns once its channel is listened on."""
        with self._watch_lock:
            if add == (name in watched):
                return
            if add:
                watched.add(name)
            else:
                watched.discard(name)
            ticket = self._listener.want(channel, add)
        if add:
            # A release right after this returns must be heard: it is the caller's cue to look again.
            self._listener.wait_applied(ticket)

    @property
    def notifying(self) -> bool:
        return self._listener.live

    def _on_payload(self, payload: str) -> None:
        with self._watch_lock:
            if payload.startswith(RELEASED_PREFIX):
                name, watched, kind = (
                    payload[len(RELEASED_PREFIX) :],
                    self._watched_leases,
                    NotificationKind.RELEASED,
                )
            elif payload.startswith(GROUP_PREFIX):
                name, watched, kind = (
                    payload[len(GROUP_PREFIX) :],
                    self._watched_groups,
                    NotificationKind.GROUP_CHANGED,
                )
            else:
                return
            if name not in watched:
                return
        self._publish(Notification(kind, name))

    def _publish(self, event: Notification) -> None:
        with self._watch_lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception:  # one listener's bug must not silence the others
                logger.exception("notification listener %r failed on %s", subscriber, event)

    def _settings_changed(self) -> None:
        # LISTEN where the releases are now sent; the reconnection makes the engine look again.
        with self._watch_lock:
            listening = bool(self._subscribers)
        if listening:
            self._listener.stop()
            self._listener.start()

    def close(self) -> None:
        """Stop listening too: until ``subscribe`` is called again, the engine polls."""
        self._listener.stop()
        with self._watch_lock:
            self._subscribers.clear()
            self._watched_leases.clear()
            self._watched_groups.clear()
            self._listener.forget_channels()
        super().close()

    def after_fork(self) -> None:
        super().after_fork()
        self._watch_lock = threading.Lock()
        self._listener.after_fork()
        if self._subscribers:
            self._listener.start()
