"""One Simba session: one ZooKeeper session on a kazoo client of its own.

The client is never pointed at another ZooKeeper session: once kazoo reports the session lost
(expired or closed), or connects under another session id, the Simba session has ended for good
and every later call raises ``SessionExpired``.

A session's place in a name's line is an ephemeral sequential node (``line.py``), tracked here
with the position of its create in the order in which requests were queued on the client
(ZooKeeper answers one session's requests in that order):

* ``acquire`` sends, back to back in one round trip, the create of the session's node and a
  listing of the line. First in line: the name is held, with the node's czxid as token. Not first:
  a caller that does not wait deletes its node again; one that waits stays in line, watching the
  nodes ahead of it (``_Watch``). Once none is left, the name is ours, without asking: no node can
  join a line ahead of ours. It is announced as HANDED_OVER, and nobody else is woken.
* ``release`` deletes the term's own node, a path no other term ever has: one request, and no
  way to delete a newer holder's node, whoever else deleted or created what meanwhile. A node
  being deleted stays "leaving" until ZooKeeper confirms it is gone: a delete that failed (a
  connection loss, a timeout) is sent again by the next keep-alive, acquire of that name or
  release of that term, and the node is never taken for a held one again.
* ``keep_alive`` sends, back to back, a write of the session node (its mtime tells observers when
  the session was last renewed, and as a write it brings the connected server up to date) and a
  ``getEphemerals`` of the leases directory: the nodes this ZooKeeper session really owns. A node
  created before that request and missing from the list was deleted (released or force
  released). A listed node the session did not know of (a create whose reply was lost) is looked
  at once: first in line, it is reported as held; otherwise it is deleted. One round trip
  whatever the number of leases (plus, in the same round trip, the deletes that failed before).
* A watchdog (``watchdog.py``) ends a session that no keep-alive renewed within its lease, since
  kazoo's own heartbeats would keep it alive forever.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.protocol.states import Callback, EventType, WatchedEvent

from ...spi import (
    BackendTimeout,
    BackendUnavailable,
    Grant,
    Notification,
    NotificationKind,
    Renewal,
    SessionExpired,
)
from . import line
from .client import create_container_async, get_ephemerals_async, negotiated_timeout, new_client
from .errors import Deadline, translate, wait
from .layout import Layout, SessionRecord, format_session_id
from .options import ZookeeperOptions

logger = logging.getLogger("django_simba.backends.zookeeper")

LayoutPreparer = Callable[[KazooClient, Deadline], None]
Announcer = Callable[[Notification], None]

_WATCHED_AHEAD = 4  # see _Watch
_LINES_REMEMBERED = 4096  # names whose line is known to exist: their acquire does not create it
_CREATE_ATTEMPTS = 4  # a node can vanish between our create and our look at it; retry a few times


@dataclass(frozen=True, slots=True)
class _Node:
    """One of the session's nodes in a name's line."""

    path: str
    token: int  # its czxid
    seq: int  # position of its create in the client's request order


@dataclass(slots=True)
class _Watch:
    """The watches a waiting node set on nodes ahead of it in line.

    A waiter watches every node ahead of it while they are few (``_WATCHED_AHEAD``): when the
    last of them goes, the name is ours, since no node can join a line ahead of ours, and no
    request is needed to know it. Further back it watches only the node just ahead, and lists
    the line again when that one goes, so that one release wakes a few waiters at most.
    """

    node: _Node
    ahead: set[str]  # watched nodes not seen gone yet
    whole: bool  # the watched nodes are all the nodes that were ahead


@dataclass(slots=True)
class _Leaving:
    """One of the session's nodes being deleted, until ZooKeeper confirms it is gone."""

    name: str
    token: int
    sent: int = 0  # sequence number of the latest delete sent for it (0: none yet)
    failed: bool = False  # that delete failed: send it again


class _NodeGone(Exception):
    """The session's node is no longer in its line (deleted by someone, or left meanwhile)."""


class ZkSession:
    """A live ZooKeeper session with the leases and memberships it holds."""

    def __init__(
        self,
        client: KazooClient,
        options: ZookeeperOptions,
        layout: Layout,
        metadata: str,
        lease: float,
        announce: Announcer,
    ):
        self.client = client
        self.announce = announce
        self.layout = layout
        self.security = options.security
        self.metadata = metadata
        self.lease = lease
        self.zk_id = 0
        self.session_id = ""
        self.timeout = lease  # the negotiated session timeout, once connected
        #: monotonic time after which the watchdog ends the session (no keep-alive renewed it)
        self.renew_by = time.monotonic() + lease
        #: why the session ended; empty while it is live
        self.ended_because = ""
        self._mutex = threading.Lock()
        self._held: dict[str, _Node] = {}  # first in line: the name is ours
        self._waiting: dict[str, _Node] = {}  # further back in line
        self._watches: dict[str, _Watch] = {}  # of the waiting nodes: the latest watch set for each
        self._leaving: dict[str, _Leaving] = {}  # by path: nodes being deleted
        self._creating: dict[str, int] = {}  # names with a create on its way
        self._lines_seen: OrderedDict[str, None] = OrderedDict()  # most recently used last
        self._seq = 0
        self._connected = False
        self._state_changed = threading.Condition(self._mutex)
        self._stopped = threading.Event()
        self._stopping = False
        client.add_listener(self._on_state)

    # -- lifecycle ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        options: ZookeeperOptions,
        layout: Layout,
        lease: float,
        metadata: str,
        deadline: Deadline,
        prepare_layout: LayoutPreparer,
        announce: Announcer,
    ) -> ZkSession:
        """Connect a new client asking for a session timeout of ``lease``; create the session node.

        ``announce`` is told, on kazoo's threads, of names handed to this session.
        """
        client = new_client(options, session_timeout=lease)
        session = cls(client, options, layout, metadata, lease, announce)
        try:
            connect_within = min(options.connection_timeout, deadline.left())
            if not session.client.start_async().wait(connect_within):
                raise BackendTimeout(
                    f"could not connect to ZooKeeper at {options.hosts} within {connect_within:g} s"
                )
            client_id = session.client.client_id
            if client_id is None:
                raise BackendUnavailable("the ZooKeeper connection dropped while opening a session")
            session.zk_id = client_id[0]
            session.session_id = format_session_id(session.zk_id)
            session.timeout = negotiated_timeout(session.client) or lease
            prepare_layout(session.client, deadline)
            path = layout.session(session.session_id)
            record = SessionRecord(metadata, lease, session.timeout).encode()
            acl = session.security.acl_for(path)
            result, _ = session._send(
                lambda: session.client.create_async(path, record, acl=acl, ephemeral=True)
            )
            session._wait(result, deadline, "creating the session node")
            with session._mutex:
                session.renew_by = time.monotonic() + lease
        except BaseException as error:
            session.end("opening it failed")
            if isinstance(error, KazooException):
                raise translate(error, "opening a session") from error
            raise
        return session

    def end(self, reason: str) -> bool:
        """End the session for good and stop its client (in the background). False if already ended."""
        with self._mutex:
            ended = self._end_locked(reason)
        self._stop_client()
        return ended

    def end_if_overdue(self, now: float) -> bool:
        """The watchdog's check: end the session when no keep-alive renewed it in time."""
        with self._mutex:
            if self.ended_because or self.renew_by > now:
                return False
            self._end_locked(f"no keep-alive within its lease of {self.lease:g} s")
        logger.warning("django-simba: ZooKeeper session %s was not kept alive: closing it", self.session_id)
        self._stop_client()
        return True

    def close(self, deadline: Deadline) -> None:
        """Close the ZooKeeper session: the server deletes its ephemeral nodes at once."""
        self.end("closed")
        if not self._stopped.wait(deadline.left()):
            raise BackendTimeout(
                f"closing ZooKeeper session {self.session_id} did not finish in time; "
                f"the server ends it within {self.timeout:g} s"
            )

    def _end_locked(self, reason: str) -> bool:
        if self.ended_because:
            return False
        self.ended_because = reason
        self._held.clear()
        self._waiting.clear()
        self._watches.clear()
        self._leaving.clear()  # its ephemeral nodes go with it
        self._state_changed.notify_all()
        return True

    def _stop_client(self) -> None:
        # kazoo's stop() joins its connection thread: never call it from one of kazoo's threads
        with self._mutex:
            if self._stopping:
                return
            self._stopping = True
        threading.Thread(
            target=self._stop_and_close, name=f"simba-zk-close-{self.session_id}", daemon=True
        ).start()

    def _stop_and_close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:
            logger.exception("django-simba: stopping the kazoo client of session %s failed", self.session_id)
        finally:
            self._stopped.set()

    def _on_state(self, state: str) -> None:
        """kazoo's connection-state listener (runs on kazoo's connection thread: must not block)."""
        if state == KazooState.CONNECTED and self.zk_id and self.client._session_id != self.zk_id:
            self.end("kazoo connected under another ZooKeeper session")
            return
        with self._mutex:
            reconnected = state == KazooState.CONNECTED and not self._connected and bool(self.zk_id)
            self._connected = state == KazooState.CONNECTED
            if self._connected:
                self.timeout = negotiated_timeout(self.client) or self.timeout
            self._state_changed.notify_all()
            waiting = list(self._waiting.items()) if reconnected else []
            if reconnected:
                self._watches.clear()  # kazoo dropped them with the connection
        if state == KazooState.LOST and self.zk_id:
            self.end("ZooKeeper reported the session lost (expired or closed)")
        for name, node in waiting:
            # kazoo dropped our watches with the connection: look at each line again, off this thread
            self.client.handler.dispatch_callback(Callback("watch", self._look_at_line, (name, node)))

    # -- helpers --------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return bool(self.ended_because)

    def term(self, lease: float | None = None) -> float:
        """What a renewal grants: min(lease, negotiated session timeout)."""
        return min(self.lease if lease is None else lease, self.timeout)

    def remaining(self) -> float:
        """Time left before the session ends unless kept alive, bounded by the session timeout."""
        return max(0.0, min(self.timeout, self.renew_by - time.monotonic()))

    def ensure_live(self, deadline: Deadline) -> None:
        """SessionExpired once ended or overdue; waits (within the deadline) while disconnected."""
        if self.ended_because or self.end_if_overdue(time.monotonic()):
            raise SessionExpired(self.session_id)
        with self._mutex:
            self._state_changed.wait_for(lambda: self.ended_because or self._connected, deadline.left())
            if self.ended_because:
                raise SessionExpired(self.session_id)
            if not self._connected:
                raise BackendUnavailable(f"ZooKeeper session {self.session_id} is disconnected")

    def _send(self, request: Callable[[], Any]) -> tuple[Any, int]:
        """Queue one request; its sequence number is its place in the session's request order."""
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            self._seq += 1
            return request(), self._seq

    def _wait(self, result: Any, deadline: Deadline, what: str) -> Any:
        """Wait for a reply; NoNode and NodeExists pass through, the rest becomes our exceptions."""
        try:
            return wait(result, deadline, what)
        except (NoNodeError, NodeExistsError):
            raise
        except SessionExpiredError as error:
            self.end("ZooKeeper expired the session")
            raise SessionExpired(self.session_id) from error
        except BackendUnavailable:
            if self.ended_because:
                raise SessionExpired(self.session_id) from None
            raise
        except KazooException as error:
            raise translate(error, what) from error

    # -- keep-alive -----------------------------------------------------------------------

    def keep_alive(self, lease: float, deadline: Deadline) -> Renewal:
        self.ensure_live(deadline)
        path = self.layout.session(self.session_id)
        record = SessionRecord(self.metadata, lease, self.timeout).encode()
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            self._seq += 1
            renewal = self.client.set_async(path, record)
            self._delete_again_locked(self._leaving)
            self._seq += 1
            seq = self._seq
            listing = get_ephemerals_async(self.client, self.layout.leases + "/")
        try:
            self._wait(renewal, deadline, "renewing the session")
            paths = self._wait(listing, deadline, "listing the session's leases")
        except NoNodeError:
            self.end("its session node was deleted")
            raise SessionExpired(self.session_id) from None
        found = ((path, self.layout.lease_of(path)) for path in map(self.client.unchroot, paths))
        listed = {path: place for path, place in found if place is not None}
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            self.renew_by = time.monotonic() + lease
            self.lease = lease
            for nodes in (self._held, self._waiting):
                for name, node in list(nodes.items()):
                    if node.seq < seq and node.path not in listed:
                        self._drop(name, node)  # released or force-released since it was created
            self._settle_leaving(listed, seq)
            known = self._known_paths()
            unknown = [
                (path, name)
                for path, (name, _) in listed.items()
                if path not in known and name not in self._creating
            ]
        if unknown:
            self._adopt(unknown, seq, deadline)
        with self._mutex:
            owned = {name: node.token for name, node in self._held.items()}
        return Renewal(self.term(lease), owned)

    def _known_paths(self) -> set[str]:
        held_or_waiting = {node.path for nodes in (self._held, self._waiting) for node in nodes.values()}
        return held_or_waiting | self._leaving.keys()

    def _delete_again_locked(self, paths: Iterable[str]) -> None:
        """Queue a delete again for each of ``paths`` whose delete failed (mutex held)."""
        for path in paths:
            leaving = self._leaving[path]
            if leaving.failed:
                self._seq += 1
                leaving.sent, leaving.failed = self._seq, False
                self.client.delete_async(path)

    def _settle_leaving(self, listed: Container[str], seq: int, name: str | None = None) -> None:
        """What a listing sent as request ``seq`` says of the nodes being deleted (mutex held).

        A node whose delete went before the listing is gone when not listed; still listed, that
        delete failed, and the node stays leaving until one succeeds. With ``name``, only the
        nodes of that name's line are looked at (``listed`` is that line).
        """
        for path, leaving in list(self._leaving.items()):
            if (name is None or leaving.name == name) and 0 < leaving.sent < seq:
                if path in listed:
                    leaving.failed = True
                else:
                    del self._leaving[path]

    def _leaving_of(self, name: str) -> list[str]:
        return [path for path, leaving in self._leaving.items() if leaving.name == name]

    def _adopt(self, unknown: list[tuple[str, str]], seq: int, deadline: Deadline) -> None:
        """Nodes of ours nobody here knew of (creates whose reply was lost): hold or delete each."""
        with self._mutex:
            names = {name for _, name in unknown}
            lines = {name: self.client.get_children_async(self.layout.lease(name)) for name in names}
            stats = {path: self.client.exists_async(path) for path, _ in unknown}
        strays = []
        for path, name in unknown:
            try:
                children = self._wait(lines[name], deadline, f"listing the line of {name!r}")
            except NoNodeError:
                continue
            stat = self._wait(stats[path], deadline, f"reading {path}")
            node = path.rpartition("/")[2]
            ahead = line.ahead_of(node, children)
            if stat is None or ahead is None:
                continue  # deleted meanwhile
            with self._mutex:
                if path in self._known_paths() or self.ended_because:
                    continue
                if not ahead and name not in self._held:
                    logger.info("django-simba: session %s holds %r (a reply was lost)", self.session_id, name)
                    self._held[name] = _Node(path, stat.czxid, seq)
                    continue
                self._leaving[path] = _Leaving(name, stat.czxid)
            strays.append(path)
        for path in strays:
            self._delete(path, deadline)

    # -- leases ---------------------------------------------------------------------------

    def acquire(
        self, name: str, deadline: Deadline, prepare_layout: LayoutPreparer, *, wait: bool = False
    ) -> Grant | None:
        self.ensure_live(deadline)
        directory = self.layout.lease(name)
        with self._mutex:
            mine = self._held.get(name) or self._waiting.get(name)
            if mine is not None:
                self._delete_again_locked(self._leaving_of(name))
                self._seq += 1
                listed_seq = self._seq
                listing = self.client.get_children_async(directory)
        if mine is not None:
            try:
                children = self._wait(listing, deadline, f"listing {directory}")
            except NoNodeError:
                children = []
            self._settled_by_line(name, children, listed_seq)
            with contextlib.suppress(_NodeGone):
                return self._take_place(name, mine, children, wait, deadline)
        acl = self.security.acl_for(directory)
        prefix = f"{directory}/{line.node_prefix(self.session_id)}"
        data = self.session_id.encode()
        for _ in range(_CREATE_ATTEMPTS):
            with self._mutex:  # queued together: ZooKeeper answers them in this order
                if self.ended_because:
                    raise SessionExpired(self.session_id)
                if name not in self._lines_seen:
                    # likely a new line: create it first, in the same round trip (if it exists
                    # already, the failed create costs only that request; its reply is not needed)
                    self._seq += 1
                    create_container_async(self.client, directory, acl)
                # the failed deletes of the name's released terms go first, so ours can be first
                self._delete_again_locked(self._leaving_of(name))
                self._seq += 2
                seq = self._seq - 1
                self._creating[name] = self._creating.get(name, 0) + 1
                created = self.client.create_async(
                    prefix, data, acl=acl, ephemeral=True, sequence=True, include_data=True
                )
                listing = self.client.get_children_async(directory)
            try:
                try:
                    path, stat = self._wait(created, deadline, f"joining the line of {name!r}")
                except NoNodeError:
                    self._create_line(directory, acl, deadline, prepare_layout)
                    continue
                if stat.ephemeralOwner != self.zk_id:
                    # kazoo re-created the session after an expiry: that node dies with the client
                    self.end("kazoo connected under another ZooKeeper session")
                    raise SessionExpired(self.session_id)
                node = _Node(path, stat.czxid, seq)
                with self._mutex:
                    self._waiting[name] = node  # until the listing says where it stands
                    self._saw_line(name)
                children = self._wait(listing, deadline, f"listing {directory}")
                self._settled_by_line(name, children, seq + 1)
            finally:
                with self._mutex:
                    self._creating[name] -= 1
                    if not self._creating[name]:
                        del self._creating[name]
            with contextlib.suppress(_NodeGone):
                return self._take_place(name, node, children, wait, deadline)
        raise BackendUnavailable(f"the line of {name!r} kept disappearing under us")

    def _settled_by_line(self, name: str, children: list[str], seq: int) -> None:
        with self._mutex:
            self._settle_leaving({self.layout.lease_node(name, child) for child in children}, seq, name)

    def _saw_line(self, name: str) -> None:
        """Remember that ``name``'s line exists (mutex held), for the last few thousand names."""
        self._lines_seen[name] = None
        self._lines_seen.move_to_end(name)
        if len(self._lines_seen) > _LINES_REMEMBERED:
            self._lines_seen.popitem(last=False)

    def _take_place(
        self, name: str, node: _Node, children: list[str], wait: bool, deadline: Deadline
    ) -> Grant | None:
        """Where ``node`` stands in ``children``: the grant, or ``None`` (refused)."""
        ahead = line.ahead_of(node.path.rpartition("/")[2], children)
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            mine = self._held.get(name) is node or self._waiting.get(name) is node
            if ahead is None or not mine:
                self._drop(name, node)
                raise _NodeGone
            if not ahead:
                self._drop(name, node)
                self._held[name] = node
                return Grant(name, node.token, self.remaining())
            if not wait:
                self._drop(name, node)
                self._leaving[node.path] = _Leaving(name, node.token)
        if wait:
            self._watch(name, node, ahead)
        else:
            self._delete(node.path, deadline)
        return None

    def _drop(self, name: str, node: _Node) -> None:
        for nodes in (self._held, self._waiting):
            if nodes.get(name) is node:
                del nodes[name]
        if (watch := self._watches.get(name)) is not None and watch.node is node:
            del self._watches[name]

    def _create_line(
        self, directory: str, acl: list[Any], deadline: Deadline, prepare_layout: LayoutPreparer
    ) -> None:
        result, _ = self._send(lambda: create_container_async(self.client, directory, acl))
        try:
            self._wait(result, deadline, f"creating {directory}")
        except NodeExistsError:
            pass
        except NoNodeError:
            prepare_layout(self.client, deadline)  # someone deleted our parent nodes

    # The watches on the nodes ahead run on kazoo's threads: every request here is asynchronous.

    def _watch(self, name: str, node: _Node, ahead: list[str]) -> None:
        """Wait for the nodes ahead to go (see ``_Watch``)."""
        watched = ahead if len(ahead) <= _WATCHED_AHEAD else ahead[-1:]
        watch = _Watch(node, set(watched), whole=len(watched) == len(ahead))
        with self._mutex:
            if self._waiting.get(name) is not node or self.ended_because:
                return
            if self._watches.get(name) == watch:
                return  # an attempt again while in line: the watches set last time still stand
            self._watches[name] = watch
            self._seq += len(watched)
            looks = [
                (
                    child,
                    self.client.exists_async(
                        self.layout.lease_node(name, child),
                        watch=functools.partial(self._ahead_changed, name, watch, child),
                    ),
                )
                for child in watched
            ]
        for child, looked in looks:
            looked.rawlink(functools.partial(self._ahead_looked_at, name, watch, child))

    def _ahead_looked_at(self, name: str, watch: _Watch, child: str, result: Any) -> None:
        try:
            gone = result.get_nowait() is None
        except Exception:
            return  # the connection failed: every line is looked at again on reconnection
        if gone:
            self._ahead_gone(name, watch, child)

    def _ahead_changed(self, name: str, watch: _Watch, child: str, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            return  # kazoo dropped the watch with the connection: see _on_state
        if event.type == EventType.DELETED:
            self._ahead_gone(name, watch, child)
        else:
            with self._mutex:  # that watch is spent: set them all again after a look
                if self._watches.get(name) is watch:
                    del self._watches[name]
            self._look_at_line(name, watch.node)

    def _ahead_gone(self, name: str, watch: _Watch, child: str) -> None:
        with self._mutex:
            if self._watches.get(name) is not watch or child not in watch.ahead:
                return  # a watch set before the line was looked at again, or already counted
            watch.ahead.discard(child)
            if watch.ahead:
                return
        if watch.whole:
            self._handed(name, watch.node)  # nobody is left ahead: no node can join there
        else:
            self._look_at_line(name, watch.node)  # who is ahead now?

    def _look_at_line(self, name: str, node: _Node) -> None:
        with self._mutex:
            if self._waiting.get(name) is not node:
                return  # held, given up, or ended meanwhile
        try:
            listing, _ = self._send(lambda: self.client.get_children_async(self.layout.lease(name)))
        except SessionExpired:
            return
        listing.rawlink(functools.partial(self._line_listed, name, node))

    def _line_listed(self, name: str, node: _Node, result: Any) -> None:
        try:
            children = result.get_nowait()
        except NoNodeError:
            children = []
        except Exception:
            return  # the connection failed: every line is looked at again on reconnection
        ahead = line.ahead_of(node.path.rpartition("/")[2], children)
        if ahead is None:
            with self._mutex:
                self._drop(name, node)  # deleted by someone: the engine's next attempt joins again
        elif not ahead:
            self._handed(name, node)
        else:
            self._watch(name, node, ahead)

    def _handed(self, name: str, node: _Node) -> None:
        with self._mutex:
            if self._waiting.get(name) is not node or self.ended_because:
                return
            del self._waiting[name]
            self._watches.pop(name, None)
            self._held[name] = node
        self.announce(Notification(NotificationKind.HANDED_OVER, name, self.session_id, node.token))

    def stop_waiting(self, name: str, deadline: Deadline) -> None:
        """Leave the name's line; a term already handed to this session stays."""
        with self._mutex:
            node = self._waiting.pop(name, None)
            self._watches.pop(name, None)
            if node is None or self.ended_because:
                return
            self._leaving[node.path] = _Leaving(name, node.token)
        self._delete(node.path, deadline)

    def release(self, name: str, deadline: Deadline, token: int | None = None) -> None:
        """Delete the term's node if this session holds ``name`` (with ``token``, that term).

        A release of a term whose delete failed before sends it again. A session that ended
        holds nothing.
        """
        with self._mutex:
            if self.ended_because:
                return
            node = self._held.get(name)
            if node is not None and (token is None or node.token == token):
                del self._held[name]
                self._leaving[node.path] = _Leaving(name, node.token)
                path = node.path
            else:
                failed = [
                    path
                    for path in self._leaving_of(name)
                    if self._leaving[path].failed and token in (None, self._leaving[path].token)
                ]
                if not failed:
                    return
                path = failed[0]
        self._delete(path, deadline)

    def _delete(self, path: str, deadline: Deadline) -> None:
        """Delete one of our nodes, leaving until done; a failed delete is sent again later."""
        try:
            with self._mutex:
                if self.ended_because:
                    return  # its ephemeral nodes are gone with it
                self._seq += 1
                leaving = self._leaving.get(path)
                if leaving is not None:
                    leaving.sent, leaving.failed = self._seq, False
                result = self.client.delete_async(path)
            with contextlib.suppress(NoNodeError):
                self._wait(result, deadline, f"deleting {path}")
        except SessionExpired:
            return
        except BaseException:
            with self._mutex:
                if (leaving := self._leaving.get(path)) is not None:
                    leaving.failed = True  # maybe applied, maybe not: the next listing tells
            raise
        with self._mutex:
            self._leaving.pop(path, None)

    # -- groups ---------------------------------------------------------------------------

    def join(self, group: str, deadline: Deadline, prepare_layout: LayoutPreparer) -> None:
        self.ensure_live(deadline)
        path = self.layout.member(group, self.session_id)
        acl = self.security.acl_for(path)
        data = self.metadata.encode()
        for _ in range(_CREATE_ATTEMPTS):
            result, _ = self._send(
                lambda: self.client.create_async(path, data, acl=acl, ephemeral=True, include_data=True)
            )
            try:
                _, stat = self._wait(result, deadline, f"creating {path}")
            except NodeExistsError:
                if self._is_own_member(path, deadline):
                    return
                continue
            except NoNodeError:
                # no group node yet, or the server removed the empty container in between
                self._create_group(group, deadline, prepare_layout)
                continue
            if stat.ephemeralOwner != self.zk_id:
                self.end("kazoo connected under another ZooKeeper session")
                raise SessionExpired(self.session_id)
            return
        raise BackendUnavailable(f"could not join group {group!r}: its node kept changing")

    def _is_own_member(self, path: str, deadline: Deadline) -> bool:
        result, _ = self._send(lambda: self.client.exists_async(path))
        stat = self._wait(result, deadline, f"reading {path}")
        if stat is None or stat.ephemeralOwner == self.zk_id:
            return stat is not None
        # a node at our own member path that is not ours (left by hand): replace it
        result, _ = self._send(lambda: self.client.delete_async(path))
        with contextlib.suppress(NoNodeError):
            self._wait(result, deadline, f"deleting {path}")
        return False

    def _create_group(self, group: str, deadline: Deadline, prepare_layout: LayoutPreparer) -> None:
        path = self.layout.group(group)
        acl = self.security.acl_for(path)
        for _ in range(2):
            result, _ = self._send(lambda: create_container_async(self.client, path, acl))
            try:
                self._wait(result, deadline, f"creating group node {path}")
                return
            except NodeExistsError:
                return
            except NoNodeError:
                prepare_layout(self.client, deadline)

    def leave(self, group: str, deadline: Deadline) -> None:
        if self.ended_because:
            return
        path = self.layout.member(group, self.session_id)
        try:
            result, _ = self._send(lambda: self.client.delete_async(path))
            self._wait(result, deadline, f"deleting {path}")
        except (NoNodeError, SessionExpired):
            return
