"""The Redis backend (Redis 7, single node, under Sentinel, or Redis Cluster), on redis-py.

Keys (see ``keys.py``; braces are literal hash tags):

=================================  =============================================================
``simba:lease:{name}``             hash: ``session`` (empty when free), ``token``, ``expires`` (ms,
                                   Redis time). Never expires while held; a minute after its term
                                   ended (``IDLE_LEASE_MS``), unless a new one began.
``simba:session:{sid}``            hash with PX = lease: ``metadata``, ``expires``, ``lease``.
``simba:session:{sid}:leases``     the session's lease index, same hash slot as the session.
``simba:session:{sid}:groups``     the session's group index, same hash slot as the session.
``simba:group:{group}``            sorted set of member session ids scored by expiry (Redis time).
``simba:lease:{name}:line``        single node: sessions waiting for the lease, scored in the order
                                   they joined (the lease's ``joined`` count); expires with its
                                   longest-lived waiter.
``simba:marker``                   hash, one per database (a Cluster: ``simba:marker:{tag}``, one
                                   per hash slot), written to the AOF only: the record that the
                                   server still has every write it made (``lua/_marker.lua``).
=================================  =============================================================

The two indexes are sorted sets scored by the time of the last acquire / join attempt
(rather than plain sets): on a cluster an entry that is not held yet may belong to a
grant still in flight, and keep-alive drops it only one lease after that attempt. They
carry the session's expiry too, so a crashed process leaves nothing but its lease hashes
and group entries past their score (``purge_expired`` removes those, and gives those lease
hashes their idle time; sessions need no purge).

How it works: every time decision runs inside a Lua script with ``TIME``; every remaining
time is a duration on Redis's clock. A lease is held while its ``session`` is set and its
``expires`` is in the future; keep-alive extends it through the session's lease index, in
the same script on a single node (one round trip whatever the number of leases). Release
publishes ``released`` on the lease key's channel and the backend's one pub/sub connection
delivers it, so a waiting candidate takes over at once; group changes are published on the
group key. On a single node (``hand_over``, the default, unless ``wait_replicas`` is set), a
waiting session refused the name joins its line, and a release gives the name in the same
script to the first live session of the line, with a new token and its session's expiry,
and publishes ``handed <token> <name>`` on the session hash's key, a channel the backend
subscribes to for each session it opens: the waiter holds the name without a round trip of
its own, and the other waiters sleep on. Closing a session deletes it first, then frees its
leases and memberships, then drops the indexes, so a close repeated after a failure finishes
the job. On a Redis Cluster the calls route by hash slot (``cluster.py``).

Durability and operations, what an operator must know:

* A server that forgets (a restart without persistence or from an older snapshot,
  FLUSHALL/FLUSHDB, a failover to a replica, which never has the marker) is noticed by the
  marker: new terms wait for the longest lease seen, terms from before end, and tokens go
  on from the server clock's microseconds, which are above every earlier token (premises:
  that clock never steps back; one LEASE_DURATION for the deployment). One WARNING per
  process. A restart that replays the server's own AOF changes nothing. See
  docs/redis.rst. ``wait_replicas``: every reply the engine trusts (a new term, a term
  held already, a renewal, a join) counts only once that many replicas acknowledged it,
  else the call fails with BackendUnavailable (a keep-alive then counts as failed; a new
  term or membership is given back); it keeps sessions and memberships across a
  failover. It is refused on a Cluster.
* Leases are measured with Redis ``TIME``: a step of the Redis hosts' clocks shortens or
  lengthens every lease at once.
* Run Redis with ``maxmemory-policy noeviction`` (the default), or without a ``maxmemory``.
  The backend refuses to start on ``allkeys-*`` whatever the limit (an evicted lease hash
  resets its token, which nothing repairs, and a limit can be set later without a restart)
  and on ``volatile-*`` under a limit (evicted session hashes and indexes end sessions early
  and drop memberships of live sessions without telling them); ``volatile-*`` without a
  limit evicts nothing and is warned. Where ``CONFIG`` is disabled, check these yourself and
  set ``check_eviction: False``. Leases do not rely on the check: a keep-alive that finds its
  session hash gone (evicted or expired) frees only the leases whose own expiry has passed,
  so no other session takes a lease while its holder may still trust it. The policy and the
  memory limit are per instance: another database number on the same server does not
  protect the keys.
* Timeouts: every round trip is bounded by the backend's timeout (socket and connect
  timeouts; redis-py's automatic retries are off). A single-node call is one round trip. A
  cluster call of several round trips sends no further step once its timeout has passed.
* On a cluster a lease may outlive its session's hash by the delay of a keep-alive's later
  scripts (or by up to one lease after an acquire that raced its session's death): ``owner``
  then reports the holder with empty metadata until the lease expires.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from ...spi import (
    DEFAULT_TIMEOUT,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    Notification,
    NotificationKind,
    NotificationListener,
    OpenedSession,
    OptionsProblem,
    Released,
    Renewal,
    SessionExpired,
    SessionInfo,
    validate_name,
)
from .cluster import ClusterStore
from .connection import cluster_client, standalone_client
from .guards import check_evictions, read_evictions
from .keys import (
    GROUP_PREFIX,
    HANDED_OVER,
    LEASE_PREFIX,
    SESSION_PREFIX,
    group_key,
    lease_key,
    session_key,
    tagged,
)
from .options import RedisOptions, borrowed_cache_problem
from .scripting import ClusterScripting, Scripting, StandaloneScripting, translated
from .standalone import StandaloneStore
from .subscriber import Subscriber

logger = logging.getLogger("django_simba.backends.redis")

Store = StandaloneStore | ClusterStore

#: Session ids this backend makes are 32 hex digits; anything else cannot name one of its sessions.
_SESSION_ID = re.compile(r"[0-9A-Za-z]{1,64}\Z")

#: Objects inherited by a forked child: kept referenced so that nothing closes or uses them there.
_INHERITED: list[object] = []


class RedisBackend(LeaseBackend):
    """Sessions, leases and groups in Redis. ``OPTIONS``: see :mod:`.options`.

    Thread-safe: redis-py's clients and pools are, and the backend's own state is guarded.
    """

    notifies: ClassVar[bool] = True
    idle_watches_are_free: ClassVar[bool] = True
    needs_purge: ClassVar[bool] = False  # sessions expire on their own (PX)
    vendor: ClassVar[str] = "redis"
    options_check_id = "django_simba.E013"

    @classmethod
    def options_problems(
        cls, options: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT
    ) -> list[OptionsProblem]:
        """The constructor's verdict, and then whether the cache it borrows a server from can lend one."""
        problems = super().options_problems(options, timeout=timeout)
        if problems:
            return problems
        problem = borrowed_cache_problem(RedisOptions.parse(options).cache)
        if problem is None:
            return []
        return [
            OptionsProblem(
                problem, "Set SIMBA['OPTIONS']['cache'] to a django-redis cache alias, or give 'url'."
            )
        ]

    @classmethod
    def options_hint(cls) -> str:
        return (
            "Give 'cache' (a django-redis cache alias), 'url' (redis://...), on a cluster "
            "'startup_nodes' with 'cluster': True, or under Sentinel 'sentinels' with 'service'."
        )

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(options, timeout=timeout)
        self.settings = RedisOptions.parse(self.options)
        self.hands_over = self.settings.hand_over
        self._init_state()

    def _init_state(self) -> None:
        self._mutex = threading.Lock()
        self._store: Store | None = None
        self._listeners: list[NotificationListener] = []
        self._pubsub_turn = 0
        self.subscriber = Subscriber(
            self._pubsub_connection, self._on_message, self._on_resync, timeout=self.timeout
        )

    @property
    def cluster(self) -> bool:
        return self.settings.cluster

    # -- connection -----------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The connected store, built on first use (no I/O happens before)."""
        store = self._store
        if store is None:
            with self._mutex:
                if self._store is None:
                    self._store = self._connect()
                store = self._store
        return store

    def _connect(self) -> Store:
        with translated("connect", self.timeout):
            scripting: Scripting
            if self.settings.cluster:
                scripting = ClusterScripting(cluster_client(self.settings, self.timeout))
            else:
                scripting = StandaloneScripting(standalone_client(self.settings, self.timeout))
            try:
                if self.settings.check_eviction:
                    check_evictions(read_evictions(scripting))
                scripting.load_all()
            except BaseException:
                scripting.close()
                raise
            if isinstance(scripting, ClusterScripting):
                return ClusterStore(scripting, timeout=self.timeout)
            return StandaloneStore(
                scripting,
                timeout=self.timeout,
                wait_replicas=self.settings.wait_replicas,
                hand_over=self.hands_over,
            )

    def assume_nothing_lost(self) -> int:
        """For test fixtures only: record that the server lost nothing, so its first grant is not held back.

        A server without a marker (``lua/_marker.lua``) holds new terms back for a lease at its
        first grant, as after a data loss; a fixture that starts a fresh server calls this to skip
        that wait. It creates the missing markers (every hash slot's on a cluster) without a hold-back,
        and never shortens one under way. Never call it in production: on a server that did lose
        its data it lets a new term overlap one that its holder still trusts. Returns how many
        markers it created.
        """
        with translated("mark", self.timeout):
            return self.store.mark(0)

    def check_server(self) -> None:
        """Connect and run the start-up guards now (system checks, the status command)."""
        with translated("ping", self.timeout):
            self.store.scripting.command("PING")

    # -- sessions ---------------------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        with translated("open_session", self.timeout):
            opened = self.store.open_session(_ms(lease_duration), metadata)
        if self.hands_over:
            # Names are handed to the session on its own channel; it is in no line before this returns.
            self.subscriber.watch(session_key(opened.session_id))
        return opened

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        _require_session_id(session_id)
        with translated("keep_alive", self.timeout):
            return self.store.keep_alive(session_id, _ms(lease_duration))

    def _close_session(self, session_id: str) -> None:
        if _SESSION_ID.match(session_id):
            with translated("close_session", self.timeout):
                self.store.close_session(session_id)
            self.subscriber.unwatch(session_key(session_id))

    # -- leases -----------------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        _require_session_id(session_id)
        with translated("acquire", self.timeout):
            return self.store.acquire(session_id, name, wait)

    def _stop_waiting(self, session_id: str, name: str) -> None:
        store = self.store
        if isinstance(store, StandaloneStore) and _SESSION_ID.match(session_id):
            with translated("stop_waiting", self.timeout):
                store.stop_waiting(session_id, name)

    def _release(self, session_id: str, name: str, token: int | None) -> Released:
        if not _SESSION_ID.match(session_id):
            return Released(held=False)  # not an id this backend makes: it holds nothing
        with translated("release", self.timeout):
            return self.store.release(session_id, name, token or 0)

    def _owner(self, name: str) -> LeaseInfo | None:
        with translated("owner", self.timeout):
            return self.store.owner(name)

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        with translated("leases", self.timeout):
            return self.store.leases(prefix)

    def _force_release(self, name: str) -> bool:
        with translated("force_release", self.timeout):
            return self.store.force_release(name)

    # -- groups -------------------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        _require_session_id(session_id)
        with translated("join", self.timeout):
            self.store.join(session_id, group)

    def _leave(self, session_id: str, group: str) -> None:
        if _SESSION_ID.match(session_id):
            with translated("leave", self.timeout):
                self.store.leave(session_id, group)

    def _members(self, group: str) -> list[Member]:
        with translated("members", self.timeout):
            return self.store.members(group)

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        with translated("groups", self.timeout):
            return self.store.groups(prefix)

    # -- operations -----------------------------------------------------------------------------

    def _sessions(self) -> list[SessionInfo]:
        with translated("sessions", self.timeout):
            return self.store.sessions()

    def _purge_expired(self, limit: int) -> int:
        with translated("purge_expired", self.timeout):
            return self.store.purge_expired(limit)

    # -- notifications ---------------------------------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        """Deliver notifications to ``listener`` from the pub/sub thread (started here, no I/O)."""
        with self._mutex:
            if listener not in self._listeners:
                self._listeners = [*self._listeners, listener]
        self.subscriber.start()

    def watch_lease(self, name: str) -> None:
        """Subscribe to the lease's channel; returns once subscribed (or at once while disconnected)."""
        self.subscriber.watch(lease_key(validate_name(name)))

    def unwatch_lease(self, name: str) -> None:
        self.subscriber.unwatch(lease_key(validate_name(name)))

    def watch_group(self, group: str) -> None:
        self.subscriber.watch(group_key(validate_name(group)))

    def unwatch_group(self, group: str) -> None:
        self.subscriber.unwatch(group_key(validate_name(group)))

    @property
    def notifying(self) -> bool:
        return self.subscriber.live

    def _pubsub_connection(self) -> Any:
        """A new, unconnected connection for the pub/sub thread (next primary on a cluster)."""
        scripting = self.store.scripting
        if isinstance(scripting, ClusterScripting):
            primaries = scripting.client.get_primaries()
            self._pubsub_turn += 1
            # plain PUBLISH reaches every node of a cluster, so any primary will do
            pool = primaries[self._pubsub_turn % len(primaries)].redis_connection.connection_pool
        else:
            pool = scripting.client.connection_pool
        return pool.connection_class(**pool.connection_kwargs)

    def _on_message(self, channel: str, payload: str) -> None:
        name = tagged(channel, LEASE_PREFIX)
        if name is not None:
            self._deliver(Notification(NotificationKind.RELEASED, name))
            return
        session_id = tagged(channel, SESSION_PREFIX)
        if session_id is not None:
            handed = _handed_over(session_id, payload)
            if handed is not None:
                self._deliver(handed)
            return
        group = tagged(channel, GROUP_PREFIX)
        if group is not None:
            self._deliver(Notification(NotificationKind.GROUP_CHANGED, group))

    def _on_resync(self) -> None:
        self._deliver(Notification(NotificationKind.RESYNC))

    def _deliver(self, event: Notification) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("django-simba: a notification listener failed on %s", event)

    # -- lifecycle -------------------------------------------------------------------------------

    def after_fork(self) -> None:
        """In a forked child: forget the parent's connections and pub/sub thread, unused and unclosed.

        Listeners and watches are forgotten too: the child's engine subscribes anew.
        """
        _INHERITED.append((self._store, self.subscriber))
        self._init_state()

    def close(self) -> None:
        """Stop the pub/sub thread and close the connections; listeners and watches are dropped."""
        self.subscriber.stop()
        with self._mutex:
            store, self._store = self._store, None
        if store is not None:
            store.scripting.close()
        self._init_state()


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _handed_over(session_id: str, payload: str) -> Notification | None:
    """The HANDED_OVER of a ``handed <token> <name>`` message on a session's channel."""
    kind, _, rest = payload.partition(" ")
    token, _, name = rest.partition(" ")
    if kind != HANDED_OVER or not token.isdigit() or not name:
        return None
    return Notification(NotificationKind.HANDED_OVER, name, session_id, int(token))


def _require_session_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise SessionExpired(str(session_id))
