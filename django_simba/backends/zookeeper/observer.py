"""The shared client: observation (owner, leases, members, groups, sessions), force-release, watches.

It owns nothing, so it may reconnect under a new ZooKeeper session whenever kazoo needs to.

Remaining times of other sessions come from their session node: its mtime is the server's wall
clock at the last keep-alive. The observer estimates the server's clock now from a write of its
own (``{root}/clock``, at most every 30 s and after each reconnection), so only the server's
clock and local durations enter the figure. A client that may not write there falls back to its
own wall clock; the figure is for display and decides nothing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoAuthError, NoNodeError

from ...spi import BackendTimeout, LeaseInfo, Member, SessionInfo
from ...spi.clock import local_clock
from . import line
from .client import connect_failure, ensure_nodes, new_client
from .errors import Deadline, kazoo_errors, wait
from .foreign import ForeignNodes
from .layout import Layout, SessionRecord, format_session_id
from .options import ZookeeperOptions
from .watches import NotificationHub

logger = logging.getLogger("django_simba.backends.zookeeper")

SHARED_SESSION_TIMEOUT = 10.0
CLOCK_REFRESH = 30.0
_HOLDER_LOOKS = 3  # a holder may release between the listing of its line and the look at its node
_HEADS_LOOKED_AT = 4  # nodes at the head of a line looked at together, in case the first is foreign


class Observer:
    def __init__(self, options: ZookeeperOptions, layout: Layout, foreign: ForeignNodes) -> None:
        self.options = options
        self.layout = layout
        self.foreign = foreign
        self.hub = NotificationHub(layout, foreign)
        self._mutex = threading.Lock()
        self._connected = threading.Condition(self._mutex)
        self._client: KazooClient | None = None
        self._is_connected = False
        self._clock_offset = 0.0  # server wall clock - local clock, in seconds
        self._clock_read_at = -math.inf

    # -- the client -----------------------------------------------------------------------

    def start(self) -> None:
        """Start connecting (without waiting) unless already started."""
        with self._mutex:
            if self._client is None:
                client = new_client(self.options, session_timeout=SHARED_SESSION_TIMEOUT)
                client.add_listener(lambda state: self._on_state(client, state))
                self._client = client
                client.start_async()

    def client(self, deadline: Deadline) -> KazooClient:
        self.start()
        with self._mutex:
            if not self._connected.wait_for(lambda: self._is_connected, deadline.left()):
                why = "" if self._client is None else connect_failure(self._client)
                raise BackendTimeout(f"could not connect to ZooKeeper at {self.options.hosts} in time{why}")
            assert self._client is not None
            return self._client

    def _on_state(self, client: KazooClient, state: str) -> None:
        with self._mutex:
            if client is not self._client:
                return
            self._is_connected = state == KazooState.CONNECTED
            self._clock_read_at = -math.inf  # the leader (whose clock stamps mtimes) may have changed
            self._connected.notify_all()
        if state == KazooState.CONNECTED:
            self.hub.connected(client)
        else:
            self.hub.disconnected()

    def close(self, timeout: float) -> None:
        with self._mutex:
            client, self._client = self._client, None
            self._is_connected = False
        self.hub.disconnected()
        if client is not None:
            stopper = threading.Thread(target=_stop_and_close, args=(client,), daemon=True)
            stopper.start()
            stopper.join(timeout)

    # -- the server's clock ---------------------------------------------------------------

    def server_now(self, client: KazooClient, deadline: Deadline) -> float:
        """The server's wall clock now (seconds since the epoch), from our last write's mtime."""
        if local_clock() - self._clock_read_at > CLOCK_REFRESH:
            self._read_clock(client, deadline)
        return local_clock() + float(self._clock_offset)

    def _read_clock(self, client: KazooClient, deadline: Deadline) -> None:
        for _ in range(2):
            sent = local_clock()
            try:
                stat = wait(
                    client.set_async(self.layout.clock, b""),
                    deadline,
                    "reading the server clock",
                    passthrough=(NoAuthError,),
                )
            except NoNodeError:
                ensure_nodes(client, self.layout.persistent_nodes(), self.options, deadline)
                continue
            except NoAuthError:
                break
            received = local_clock()
            self._clock_offset = stat.mtime / 1000.0 - (sent + received) / 2
            self._clock_read_at = received
            return
        logger.info("django-simba: cannot write %s; remaining times use this host's clock", self.layout.clock)
        self._clock_offset = time.time() - local_clock()
        self._clock_read_at = local_clock()

    def _remaining(self, record: SessionRecord, stat: Any, now: float) -> float:
        renewed_at = float(stat.mtime) / 1000.0
        return min(record.term, record.term - (now - renewed_at))

    # -- observation ----------------------------------------------------------------------

    def owner(self, name: str, deadline: Deadline) -> LeaseInfo | None:
        client = self.client(deadline)
        with kazoo_errors(f"reading lease {name!r}"):
            holders = self._holders(client, [name], deadline, sync=True)
            return self._lease_infos(client, holders, deadline)[0] if holders else None

    def leases(self, prefix: str, deadline: Deadline) -> list[LeaseInfo]:
        client = self.client(deadline)
        with kazoo_errors("listing leases"):
            names = [
                name
                for name in self._children(client, self.layout.leases, deadline)
                if name.startswith(prefix)
            ]
            return self._lease_infos(client, self._holders(client, names, deadline), deadline)

    def _holders(
        self, client: KazooClient, names: list[str], deadline: Deadline, *, sync: bool = False
    ) -> list[tuple[str, str, Any]]:
        """``(name, path, stat)`` of the holder's node of each held name.

        The holder is the first node of the line that is a session's (``foreign.py``): a few
        nodes at the head are looked at together, and a foreign one is looked past. A holder
        that is gone when looked at released meanwhile: the line is looked at again, a few times.
        """
        tries = dict.fromkeys(names, _HOLDER_LOOKS)
        found: list[tuple[str, str, Any]] = []
        while tries:
            if sync:
                client.sync_async(self.layout.leases)  # answered before the listings that follow
            listings = {name: client.get_children_async(self.layout.lease(name)) for name in tries}
            heads = {}
            for name, listing in listings.items():
                directory = self.layout.lease(name)
                try:
                    children = wait(listing, deadline, f"listing the line of {name!r}")
                except NoNodeError:
                    children = []
                first = line.in_order(children, self.foreign.in_line(directory))[:_HEADS_LOOKED_AT]
                if not first:
                    del tries[name]  # nobody holds it
                    continue
                heads[name] = [(child, client.exists_async(f"{directory}/{child}")) for child in first]
            for name, looks in heads.items():
                directory = self.layout.lease(name)
                for child, lookup in looks:
                    stat = wait(lookup, deadline, f"reading the holder of {name!r}")
                    if stat is None:
                        tries[name] -= 1  # released meanwhile: look again
                        if not tries[name]:
                            del tries[name]
                        break
                    if not self.foreign.judge_line_node(directory, child, stat):
                        found.append((name, f"{directory}/{child}", stat))
                        del tries[name]
                        break
                # all foreign: the next listing looks past them
        return found

    def _lease_infos(
        self, client: KazooClient, found: list[tuple[str, str, Any]], deadline: Deadline
    ) -> list[LeaseInfo]:
        if not found:
            return []
        holders = {format_session_id(stat.ephemeralOwner) for _, _, stat in found}
        records = self._session_records(client, holders, deadline)
        now = self.server_now(client, deadline)
        infos = []
        for name, _, stat in found:
            session_id = format_session_id(stat.ephemeralOwner)
            record = records.get(session_id)
            if record is None:  # its session is ending right now
                infos.append(LeaseInfo(name, session_id, stat.czxid, 0.0, ""))
                continue
            session_record, session_stat = record
            remaining = max(0.0, self._remaining(session_record, session_stat, now))
            infos.append(LeaseInfo(name, session_id, stat.czxid, remaining, session_record.metadata))
        return infos

    def _session_records(
        self, client: KazooClient, session_ids: Iterable[str], deadline: Deadline
    ) -> dict[str, tuple[SessionRecord, Any]]:
        lookups = {sid: client.get_async(self.layout.session(sid)) for sid in session_ids}
        records = {}
        for sid, lookup in lookups.items():
            try:
                data, stat = wait(lookup, deadline, "reading sessions")
            except NoNodeError:
                continue
            records[sid] = (SessionRecord.decode(data), stat)
        return records

    def sessions(self, deadline: Deadline) -> list[SessionInfo]:
        client = self.client(deadline)
        with kazoo_errors("listing sessions"):
            session_ids = self._children(client, self.layout.sessions, deadline)
            records = self._session_records(client, session_ids, deadline)
            if not records:
                return []
            now = self.server_now(client, deadline)
        return [
            SessionInfo(sid, self._remaining(record, stat, now), record.metadata)
            for sid, (record, stat) in records.items()
        ]

    def members(self, group: str, deadline: Deadline) -> list[Member]:
        client = self.client(deadline)
        path = self.layout.group(group)
        with kazoo_errors(f"listing members of {group!r}"):
            listing = self._after_sync(client, path, deadline, client.get_children_async)
            try:
                session_ids = wait(listing, deadline, f"listing {path}")
            except NoNodeError:
                return []
            return self._members(client, group, session_ids, deadline)

    def _members(
        self, client: KazooClient, group: str, session_ids: list[str], deadline: Deadline
    ) -> list[Member]:
        lookups = {sid: client.get_async(self.layout.member(group, sid)) for sid in session_ids}
        members = []
        directory = self.layout.group(group)
        for sid, lookup in lookups.items():
            try:
                data, stat = wait(lookup, deadline, f"reading members of {group!r}")
            except NoNodeError:
                continue  # left meanwhile
            if not self.foreign.judge_member(directory, sid, stat):
                members.append(Member(sid, (data or b"").decode(errors="replace")))
        return members

    def groups(self, prefix: str, deadline: Deadline) -> dict[str, list[Member]]:
        client = self.client(deadline)
        with kazoo_errors("listing groups"):
            names = [
                name
                for name in self._children(client, self.layout.groups, deadline)
                if name.startswith(prefix)
            ]
            listings = {name: client.get_children_async(self.layout.group(name)) for name in names}
            found = {}
            for name, listing in listings.items():
                try:
                    session_ids = wait(listing, deadline, "listing groups")
                except NoNodeError:
                    continue
                found[name] = self._members(client, name, session_ids, deadline)
            return found

    def force_release(self, name: str, deadline: Deadline) -> bool:
        """Delete the holder's own node: a term that started meanwhile is never touched."""
        client = self.client(deadline)
        with kazoo_errors(f"force-releasing {name!r}"):
            holders = self._holders(client, [name], deadline, sync=True)
            if not holders:
                return False  # nobody holds it (a foreign node is no holder: delete it by hand)
            _, path, _ = holders[0]
            try:
                wait(client.delete_async(path), deadline, f"deleting {path}")
            except NoNodeError:
                return False  # released meanwhile
        return True

    def _after_sync(
        self, client: KazooClient, path: str, deadline: Deadline, read: Callable[[str], Any]
    ) -> Any:
        """Queue a sync, then the read: the read sees every write that completed before this call."""
        synced = client.sync_async(path)
        result = read(path)
        wait(synced, deadline, f"syncing {path}")
        return result

    def _children(self, client: KazooClient, path: str, deadline: Deadline) -> list[str]:
        listing = self._after_sync(client, path, deadline, client.get_children_async)
        try:
            children: list[str] = wait(listing, deadline, f"listing {path}")
        except NoNodeError:
            return []
        return children


def _stop_and_close(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception:
        logger.exception("django-simba: stopping the shared kazoo client failed")
