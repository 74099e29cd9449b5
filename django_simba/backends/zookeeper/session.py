"""One Simba session: one ZooKeeper session on a kazoo client of its own.

The client is never pointed at another ZooKeeper session: once kazoo reports the session lost
(expired or closed), or connects under another session id, the Simba session has ended for good
and every later call raises ``SessionExpired``.

What the session holds is tracked here, keyed by the order in which requests were queued on the
client (ZooKeeper answers one session's requests in that order):

* ``acquire`` creates ``{root}/leases/{name}`` (ephemeral, data = session id) and records the
  node's czxid as the token. A create whose reply is lost (timeout, connection loss) may still
  have been applied: the name is then "possibly owned" until the next keep-alive lists it.
  Right behind the create goes an ``exists`` with a watch, in the same round trip: when the
  create fails it tells who holds the name, and when it succeeds its watch stays on our node.
* ``release`` deletes the node. ZooKeeper cannot make a delete conditional on the node's owner,
  so the node must be known to be this term's: while the watch set with the grant has not fired
  (kazoo drops a watch from its registry as it reads the event, and drops them all when the
  connection fails), nobody deleted it, and the delete goes alone. Otherwise (no confirmed
  watch: a lost reply, a reconnection, a watch that fired) a ``sync`` and an ``exists`` check the
  owner and czxid first. Either way, an operator's force-release and another session's create
  that both land while our delete is in flight, within about one round trip, can still lose
  that session its node; its fencing token is then older than the next holder's.
* ``keep_alive`` sends, back to back, a write of the session node (its mtime tells observers when
  the session was last renewed, and as a write it brings the connected server up to date) and a
  ``getEphemerals`` of the leases directory: the names this ZooKeeper session really owns. Names
  recorded before that request and missing from the list were deleted (released or force
  released); listed names the session did not know of (lost replies) are looked up once for
  their czxid and reported. One round trip whatever the number of leases; the reply lists only
  this session's own leases, which ``owned`` must carry anyway.
* A watchdog (``watchdog.py``) ends a session that no keep-alive renewed within its lease, since
  kazoo's own heartbeats would keep it alive forever.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.states import WatchedEvent

from ...spi import BackendTimeout, BackendUnavailable, Grant, Renewal, SessionExpired
from .client import create_container_async, get_ephemerals_async, negotiated_timeout, new_client
from .errors import Deadline, translate, wait
from .layout import Layout, SessionRecord, format_session_id
from .options import ZookeeperOptions

logger = logging.getLogger("django_simba.backends.zookeeper")

LayoutPreparer = Callable[[KazooClient, Deadline], None]

_CREATE_ATTEMPTS = 4  # a node can vanish between our create and our look at it; retry a few times


@dataclass(frozen=True, slots=True)
class _Held:
    token: int
    seq: int  # position in the client's request order of the request that saw the node
    watched: bool = False  # a watch set right after the grant saw this term's node


class ZkSession:
    """A live ZooKeeper session with the leases and memberships it holds."""

    def __init__(
        self, client: KazooClient, options: ZookeeperOptions, layout: Layout, metadata: str, lease: float
    ):
        self.client = client
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
        self._releases = threading.Lock()  # releases (and adoptions) of one session run one at a time
        self._held: dict[str, _Held] = {}
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
    ) -> ZkSession:
        """Connect a new client asking for a session timeout of ``lease``; create the session node."""
        session = cls(new_client(options, session_timeout=lease), options, layout, metadata, lease)
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
            self._connected = state == KazooState.CONNECTED
            if self._connected:
                self.timeout = negotiated_timeout(self.client) or self.timeout
            self._state_changed.notify_all()
        if state == KazooState.LOST and self.zk_id:
            self.end("ZooKeeper reported the session lost (expired or closed)")

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

    def _record(self, name: str, token: int, seq: int, *, watched: bool = False) -> None:
        with self._mutex:
            if self.ended_because:
                return
            known = self._held.get(name)
            if known is None or known.seq < seq:
                self._held[name] = _Held(token, seq, watched)

    def _on_lease_watch(self, event: WatchedEvent) -> None:
        """Watches on lease nodes are read from kazoo's registry (see ``_watch_live``), not here."""

    def _watch_live(self, path: str) -> bool:
        """Whether our lease watch on ``path`` is registered and has not fired.

        kazoo (2.x) keeps a path's live watches in ``_data_watchers``, removes them there on its
        connection thread as soon as it reads their event, and empties it when the connection
        drops: no event can have been read for ``path`` while ours is still in it.
        """
        registered = getattr(self.client, "_data_watchers", None)
        if not isinstance(registered, dict):
            return False  # a kazoo without that registry: always check the node first
        return self._on_lease_watch in registered.get(_prefix_root(self.client.chroot, path), ())

    def _forget(self, name: str) -> None:
        with self._mutex:
            self._held.pop(name, None)

    def _lock_releases(self, deadline: Deadline) -> None:
        if not self._releases.acquire(timeout=deadline.left()):
            raise BackendTimeout(f"another release of session {self.session_id} did not finish in time")

    # -- keep-alive -----------------------------------------------------------------------

    def keep_alive(self, lease: float, deadline: Deadline) -> Renewal:
        self.ensure_live(deadline)
        path = self.layout.session(self.session_id)
        record = SessionRecord(self.metadata, lease, self.timeout).encode()
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            self._seq += 1
            seq = self._seq
            renewal = self.client.set_async(path, record)
            listing = get_ephemerals_async(self.client, self.layout.leases + "/")
        try:
            self._wait(renewal, deadline, "renewing the session")
            paths = self._wait(listing, deadline, "listing the session's leases")
        except NoNodeError:
            self.end("its session node was deleted")
            raise SessionExpired(self.session_id) from None
        prefix = self.layout.leases + "/"
        listed = {path[len(prefix) :] for path in map(self.client.unchroot, paths) if path.startswith(prefix)}
        with self._mutex:
            if self.ended_because:
                raise SessionExpired(self.session_id)
            self.renew_by = time.monotonic() + lease
            self.lease = lease
            for name, held in list(self._held.items()):
                if held.seq < seq and name not in listed:
                    del self._held[name]  # released or force-released since it was recorded
            unknown = sorted(listed - self._held.keys())
        if unknown:
            self._adopt(unknown, deadline)
        with self._mutex:
            owned = {name: held.token for name, held in self._held.items()}
        return Renewal(self.term(lease), owned)

    def _adopt(self, names: list[str], deadline: Deadline) -> None:
        """Look up leases this session owns but did not know of (creates whose reply was lost)."""
        self._lock_releases(deadline)
        try:
            with self._mutex:
                self._seq += 1
                seq = self._seq
                lookups = {name: self.client.exists_async(self.layout.lease(name)) for name in names}
            for name, lookup in lookups.items():
                stat = self._wait(lookup, deadline, "checking a possibly owned lease")
                if stat is not None and stat.ephemeralOwner == self.zk_id:
                    logger.info("django-simba: session %s owns %r (a reply was lost)", self.session_id, name)
                    self._record(name, stat.czxid, seq)
        finally:
            self._releases.release()

    # -- leases ---------------------------------------------------------------------------

    def acquire(self, name: str, deadline: Deadline, prepare_layout: LayoutPreparer) -> Grant | None:
        self.ensure_live(deadline)
        path = self.layout.lease(name)
        acl = self.security.acl_for(path)
        data = self.session_id.encode()
        for _ in range(_CREATE_ATTEMPTS):
            with self._mutex:  # both queued together: ZooKeeper answers them in this order
                if self.ended_because:
                    raise SessionExpired(self.session_id)
                self._seq += 2
                created_seq, looked_seq = self._seq - 1, self._seq
                created = self.client.create_async(path, data, acl=acl, ephemeral=True, include_data=True)
                looked = self.client.exists_async(path, watch=self._on_lease_watch)
            try:
                _, stat = self._wait(created, deadline, f"creating {path}")
            except NodeExistsError:
                stat = self._wait(looked, deadline, f"reading {path}")
                if stat is None:
                    continue  # released between our create and our look: try again
                if stat.ephemeralOwner != self.zk_id:
                    self._unconfirm(name)
                    return None
                return self._grant(name, stat, looked_seq, watched=True)  # ours already: the same term
            except NoNodeError:
                prepare_layout(self.client, deadline)  # someone deleted our parent nodes
                continue
            try:
                seen = self._wait(looked, deadline, f"reading {path}")
            except (BackendTimeout, BackendUnavailable):
                seen = None  # the grant stands; its release checks the node first
            watched = seen is not None and seen.czxid == stat.czxid
            return self._grant(name, stat, created_seq, watched=watched)
        return None  # the name changed hands under us every time: someone else is taking it

    def _grant(self, name: str, stat: Any, seq: int, *, watched: bool) -> Grant:
        if stat.ephemeralOwner != self.zk_id:
            # kazoo re-created the session after an expiry: that node dies with the client
            self.end("kazoo connected under another ZooKeeper session")
            raise SessionExpired(self.session_id)
        self._record(name, stat.czxid, seq, watched=watched)
        return Grant(name, stat.czxid, self.remaining())

    def _unconfirm(self, name: str) -> None:
        """Another session holds ``name``: a record of ours is stale and may not be deleted unchecked."""
        with self._mutex:
            held = self._held.get(name)
            if held is not None and held.watched:
                self._held[name] = _Held(held.token, held.seq)

    def release(self, name: str, deadline: Deadline, token: int | None = None) -> None:
        """Delete the lease node if this session owns it (and, with ``token``, it is that term).

        A session that ended holds nothing.
        """
        if self.ended_because:
            return
        path = self.layout.lease(name)
        self._lock_releases(deadline)
        try:
            with self._mutex:
                held = self._held.get(name)
            if (
                held is not None
                and held.watched
                and (token is None or held.token == token)
                and self._watch_live(path)
            ):
                self._delete(path, deadline)  # the grant's watch has not fired: still this term's node
                self._forget(name)
                return
            # sync first, so the check sees a force-release and re-creation done through another server
            synced, _ = self._send(lambda: self.client.sync_async(path))
            result, _ = self._send(lambda: self.client.exists_async(path))
            self._wait(synced, deadline, f"syncing {path}")
            stat = self._wait(result, deadline, f"reading {path}")
            ours = stat is not None and stat.ephemeralOwner == self.zk_id
            if ours and token is not None and stat.czxid != token:
                return  # a newer term of this session: not the one to free
            if ours:
                self._delete(path, deadline)
            self._forget(name)
        except SessionExpired:
            return  # its ephemeral nodes are gone with it
        finally:
            self._releases.release()

    def _delete(self, path: str, deadline: Deadline) -> None:
        result, _ = self._send(lambda: self.client.delete_async(path))
        with contextlib.suppress(NoNodeError):
            self._wait(result, deadline, f"deleting {path}")

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
