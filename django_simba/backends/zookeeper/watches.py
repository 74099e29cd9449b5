"""Notifications from ZooKeeper watches on the shared client.

* ``watch_lease(name)``: an exists watch on the node of the name's holder (the first of its
  line, ``line.py``). Its deletion is announced as RELEASED, and so is finding nobody holding the
  name when the watch is set, so a release between a refused acquire and the watch is never
  missed. While nobody holds it, watches on the line (its creation and its first node) say when
  somebody does again.
* ``watch_group(group)``: an exists watch on the group node (its creation and deletion, so a group
  that does not exist yet is covered) plus a children watch once it exists; any change is
  announced as GROUP_CHANGED, and so is setting the watch.

ZooKeeper watches fire once. Each is set again (the request is sent) before its notification goes
out, so a change right after a listener was told fires the new watch or shows in its answer.
kazoo forgets every watch when its connection drops: on reconnection they are all set again and
RESYNC is announced, since changes may have been missed meanwhile. Listeners run on kazoo's
threads and should only schedule work.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import Callback, EventType, WatchedEvent

from ...spi import Notification, NotificationKind, NotificationListener
from . import line
from .foreign import ForeignNodes
from .layout import Layout

logger = logging.getLogger("django_simba.backends.zookeeper")

Watcher = Callable[[WatchedEvent], None]


class NotificationHub:
    def __init__(self, layout: Layout, foreign: ForeignNodes) -> None:
        self._layout = layout
        self._foreign = foreign
        self._mutex = threading.Lock()
        self._listeners: list[NotificationListener] = []
        self._leases: dict[str, Watcher] = {}
        self._groups: dict[str, Watcher] = {}
        self._client: KazooClient | None = None  # set while the shared client is connected
        self._was_connected = False

    @property
    def live(self) -> bool:
        return self._client is not None and bool(self._listeners)

    def subscribe(self, listener: NotificationListener) -> None:
        with self._mutex:
            self._listeners = [*self._listeners, listener]

    # -- what is watched ------------------------------------------------------------------

    def watch_lease(self, name: str) -> None:
        with self._mutex:
            if name in self._leases:
                return
            watcher = self._leases[name] = functools.partial(self._lease_event, name)
            client = self._client
        if client is not None:
            self._arm_lease(client, name, watcher, deleted=False)

    def unwatch_lease(self, name: str) -> None:
        with self._mutex:
            self._leases.pop(name, None)

    def watch_group(self, group: str) -> None:
        with self._mutex:
            if group in self._groups:
                return
            watcher = self._groups[group] = functools.partial(self._group_event, group)
            client = self._client
        if client is not None:
            self._arm_group(client, group, watcher, announce=True)

    def unwatch_group(self, group: str) -> None:
        with self._mutex:
            self._groups.pop(group, None)

    # -- connection -----------------------------------------------------------------------

    def connected(self, client: KazooClient) -> None:
        """Called on kazoo's connection thread: hand the work to kazoo's watch thread."""
        with self._mutex:
            self._client = client
            resync, self._was_connected = self._was_connected, True
        client.handler.dispatch_callback(Callback("watch", self._rearm_all, (client, resync)))

    def disconnected(self) -> None:
        with self._mutex:
            self._client = None

    def _rearm_all(self, client: KazooClient, resync: bool) -> None:
        with self._mutex:
            leases, groups = dict(self._leases), dict(self._groups)
        for name, watcher in leases.items():
            self._arm_lease(client, name, watcher, deleted=False)
        for group, watcher in groups.items():
            self._arm_group(client, group, watcher, announce=False)
        if resync:
            self._emit(NotificationKind.RESYNC, "")

    # -- leases ---------------------------------------------------------------------------
    # A holder's deletion is announced as soon as it is read; the line is listed again (to watch
    # the next holder) after the announcement's request is sent, so nothing is missed meanwhile.

    def _arm_lease(self, client: KazooClient, name: str, watcher: Watcher, *, deleted: bool) -> None:
        listing = client.get_children_async(self._layout.lease(name))
        listing.rawlink(functools.partial(self._lease_listed, client, name, watcher))
        if deleted and self._watching_lease(name):
            self._emit(NotificationKind.RELEASED, name)

    def _lease_listed(self, client: KazooClient, name: str, watcher: Watcher, result: Any) -> None:
        directory = self._layout.lease(name)
        try:
            holder = line.head(result.get_nowait(), self._foreign.in_line(directory))
        except NoNodeError:
            holder = None
        except Exception:
            return  # connection lost: everything is set again on reconnection (RESYNC)
        if not self._watching_lease(name):
            return
        if holder is None:
            # nobody holds it: say so, and watch for the line's creation or its first node
            client.exists_async(directory, watch=watcher)
            client.get_children_async(directory, watch=watcher)
            self._emit(NotificationKind.RELEASED, name)
            return
        looked = client.exists_async(self._layout.lease_node(name, holder), watch=watcher)
        looked.rawlink(functools.partial(self._holder_looked_at, client, name, holder, watcher))

    def _holder_looked_at(
        self, client: KazooClient, name: str, holder: str, watcher: Watcher, result: Any
    ) -> None:
        try:
            stat = result.get_nowait()
        except Exception:
            return
        if not self._watching_lease(name):
            return
        if stat is None:
            self._arm_lease(client, name, watcher, deleted=True)  # released before the watch was set
        elif self._foreign.judge_line_node(self._layout.lease(name), holder, stat):
            self._arm_lease(client, name, watcher, deleted=False)  # no holder: look past it

    def _lease_event(self, name: str, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            return  # kazoo dropped its watches with the connection: see connected()
        with self._mutex:
            client, watcher = self._client, self._leases.get(name)
        if watcher is None:
            return
        # a holder's node deleted; otherwise the line changed (created, deleted, a first node)
        deleted = event.type == EventType.DELETED and event.path != self._layout.lease(name)
        if client is not None:
            self._arm_lease(client, name, watcher, deleted=deleted)
        elif deleted:
            self._emit(NotificationKind.RELEASED, name)

    def _watching_lease(self, name: str) -> bool:
        with self._mutex:
            return name in self._leases

    # -- groups ---------------------------------------------------------------------------

    def _arm_group(self, client: KazooClient, group: str, watcher: Watcher, *, announce: bool) -> None:
        path = self._layout.group(group)
        client.exists_async(path, watch=watcher)
        # fails while the group does not exist (the exists watch covers its creation); its reply
        # comes after the exists reply, so both watches are set when it arrives
        listing = client.get_children_async(path, watch=watcher)
        if announce:
            listing.rawlink(functools.partial(self._group_armed, group))

    def _group_armed(self, group: str, result: Any) -> None:
        with self._mutex:
            watched = group in self._groups
        if watched:
            self._emit(NotificationKind.GROUP_CHANGED, group)

    def _group_event(self, group: str, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            return
        with self._mutex:
            client, watcher = self._client, self._groups.get(group)
        if watcher is None:
            return
        if client is not None:
            self._arm_group(client, group, watcher, announce=True)
        else:
            self._emit(NotificationKind.GROUP_CHANGED, group)

    # -- delivery -------------------------------------------------------------------------

    def _emit(self, kind: NotificationKind, name: str) -> None:
        self.announce(Notification(kind, name))

    def announce(self, event: Notification) -> None:
        """Tell every listener (the sessions' hand-overs come this way too)."""
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("django-simba: a notification listener failed on %s", event)
