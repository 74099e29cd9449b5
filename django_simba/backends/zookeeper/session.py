"""One Simba session: one ZooKeeper session on a kazoo client of its own.

The client is never pointed at another ZooKeeper session: once kazoo reports the session lost
(expired or closed), or connects under another session id, the Simba session has ended for good
and every later call raises ``SessionExpired``.

Every request of the session goes through ``send``, which numbers requests in the order they
are queued on the client (ZooKeeper answers one session's requests in that order), so a reply
can be placed before or after another. What the session holds, waits for and deletes is in
``places.py``; the requests on lease lines in ``leases.py``, on groups in ``groups.py``.

* ``keep_alive`` sends, back to back, a write of the session node (its mtime tells observers when
  the session was last renewed, and as a write it brings the connected server up to date) and a
  ``getEphemerals`` of the leases directory: the nodes this ZooKeeper session really owns. A node
  created before that request and missing from the list was deleted (released or force
  released). A listed node the session did not know of (a create whose reply was lost) is looked
  at once: first in line, it is reported as held; otherwise it is deleted. A node being deleted
  is never such a node: the deletes that failed before go first in the same round trip, and the
  listing says whether they succeeded. One round trip whatever the number of leases.
* Then it deletes the lines and group nodes the session emptied and left idle (``idle.py``),
  without waiting.
* A watchdog (``watchdog.py``) ends a session that no keep-alive renewed within its lease, since
  kazoo's own heartbeats would keep it alive forever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.protocol.states import Callback

from ...spi import BackendTimeout, BackendUnavailable, Notification, Renewal, SessionExpired, format_duration
from ...spi.clock import local_clock
from . import requests
from .acls import AclGuard
from .client import connect_failure, negotiated_timeout, new_client
from .errors import Deadline, translate, wait
from .foreign import ForeignNodes
from .groups import Groups
from .layout import Layout, SessionRecord, format_session_id
from .leases import Leases
from .options import ZookeeperOptions
from .places import WATCHED_AHEAD as _WATCHED_AHEAD  # noqa: F401  (the line tests read it here)
from .places import Places
from .requests import Request, Sent

logger = logging.getLogger("django_simba.backends.zookeeper")

LayoutPreparer = Callable[[KazooClient, Deadline], None]
Announcer = Callable[[Notification], None]


class ZkSession:
    """A live ZooKeeper session; its leases (``leases``) and memberships (``groups``)."""

    def __init__(
        self,
        client: KazooClient,
        options: ZookeeperOptions,
        layout: Layout,
        metadata: str,
        lease: float,
        announce: Announcer,
        foreign: ForeignNodes,
        guard: AclGuard,
    ):
        self.client = client
        self.announce = announce
        self.foreign = foreign  # the backend's: what is known of nodes no session made
        self.guard = guard  # the backend's: the ACLs lines and groups must keep to
        self.layout = layout
        self.security = options.security
        self.metadata = metadata
        self.lease = lease
        self.zk_id = 0
        self.session_id = ""
        self.timeout = lease  # the negotiated session timeout, once connected
        #: when, on the local clock, the watchdog ends the session (no keep-alive renewed it); that
        #: clock counts a suspend of the host, as the server's does
        self.renew_by = local_clock() + lease
        #: why the session ended; empty while it is live
        self.ended_because = ""
        self._mutex = threading.Lock()  # the lifecycle's state, and the order of requests
        self._queued = 0  # requests queued so far: the last one's sequence number
        self._connected = False
        self._state_changed = threading.Condition(self._mutex)
        self._stopped = threading.Event()
        self._stopping = False
        self.places = Places()
        self.leases = Leases(self)
        self.groups = Groups(self)
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
        foreign: ForeignNodes,
        guard: AclGuard,
    ) -> ZkSession:
        """Connect a new client asking for a session timeout of ``lease``; create the session node.

        ``announce`` is told, on kazoo's threads, of names handed to this session.
        """
        client = new_client(options, session_timeout=lease)
        session = cls(client, options, layout, metadata, lease, announce, foreign, guard)
        try:
            connect_within = min(options.connection_timeout, deadline.left())
            if not session.client.start_async().wait(connect_within):
                raise BackendTimeout(
                    f"could not connect to ZooKeeper at {options.hosts} "
                    f"within {format_duration(connect_within)}{connect_failure(session.client)}"
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
            (created,) = session.send(requests.create(path, record, acl, with_stat=False))
            session.wait(created, deadline, "creating the session node")
            with session._mutex:
                session.renew_by = local_clock() + lease
        except BaseException as error:
            session.end("opening it failed")
            # The caller never gets this session: stop its client now, not after the caller moved
            # on (kazoo would go on retrying, and logging, behind its back). Bounded by the call.
            session._stopped.wait(max(0.0, deadline.left()))
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

    def close(self, deadline: Deadline, reason: str = "closed") -> None:
        """Close the ZooKeeper session: the server deletes its ephemeral nodes at once."""
        self.end(reason)
        if not self._stopped.wait(deadline.left()):
            raise BackendTimeout(
                f"closing ZooKeeper session {self.session_id} did not finish in time; "
                f"the server ends it within {self.timeout:g} s"
            )

    def _end_locked(self, reason: str) -> bool:
        if self.ended_because:
            return False
        self.ended_because = reason
        self.places.close()
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
            waiting = self.places.after_reconnection() if reconnected else []
        if state == KazooState.LOST and self.zk_id:
            self.end("ZooKeeper reported the session lost (expired or closed)")
        for node in waiting:
            # kazoo dropped our watches with the connection: look at each line again, off this thread
            self.client.handler.dispatch_callback(Callback("watch", self.leases.look_at_line, (node,)))

    # -- helpers --------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        return bool(self.ended_because)

    def term(self, lease: float | None = None) -> float:
        """What a renewal grants: min(lease, negotiated session timeout)."""
        return min(self.lease if lease is None else lease, self.timeout)

    def remaining(self) -> float:
        """Time left before the session ends unless kept alive, bounded by the session timeout."""
        return max(0.0, min(self.timeout, self.renew_by - local_clock()))

    def ensure_live(self, deadline: Deadline) -> None:
        """SessionExpired once ended or overdue; waits (within the deadline) while disconnected."""
        now = local_clock()
        # Every call comes here: the locks only where something may be wrong (the locked checks
        # look again; a state that changes right after any check is met by the requests themselves).
        if self.ended_because or (self.renew_by <= now and self.end_if_overdue(now)):
            raise SessionExpired(self.session_id)
        if self._connected:
            return
        with self._mutex:
            self._state_changed.wait_for(lambda: self.ended_because or self._connected, deadline.left())
            if self.ended_because:
                raise SessionExpired(self.session_id)
            if not self._connected:
                raise BackendUnavailable(f"ZooKeeper session {self.session_id} is disconnected")

    def check_own(self, stat: Any) -> None:
        """A node just created must belong to this ZooKeeper session.

        If not, kazoo re-created the session after an expiry: that node dies with the client.
        """
        if stat.ephemeralOwner != self.zk_id:
            self.end("kazoo connected under another ZooKeeper session")
            raise SessionExpired(self.session_id)

    # -- requests -------------------------------------------------------------------------

    def send(self, *queued: Request) -> list[Sent]:
        """Queue requests back to back (one round trip), each numbered by its place in the order.

        Raises SessionExpired once the session ended.
        """
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            sent = []
            for request in queued:
                self._queued += 1
                sent.append(Sent(request(self.client), self._queued))
            return sent

    def wait(self, sent: Sent, deadline: Deadline, what: str) -> Any:
        """Wait for a reply; NoNode and NodeExists pass through, the rest becomes our exceptions."""
        try:
            return wait(sent.result, deadline, what)
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
        renewal, listing = self.leases.send_after_failed_deletes(
            None, requests.write(path, record), requests.own_ephemerals(self.layout.leases + "/")
        )
        try:
            self.wait(renewal, deadline, "renewing the session")
            paths = self.wait(listing, deadline, "listing the session's leases")
        except NoNodeError:
            self.end("its session node was deleted")
            raise SessionExpired(self.session_id) from None
        found = ((path, self.layout.lease_of(path)) for path in map(self.client.unchroot, paths))
        listed = {path: place[0] for path, place in found if place is not None}
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            self.renew_by = local_clock() + lease
            self.lease = lease
        unknown = self.places.reconcile(listed, listing.seq)
        if unknown:
            self.leases.adopt_lost_creates(unknown, listing.seq, deadline)
        self.leases.delete_idle_lines()
        self.groups.delete_idle_groups()
        return Renewal(self.term(lease), self.places.owned())
