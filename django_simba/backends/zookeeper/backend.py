"""The ZooKeeper backend: sessions, leases and groups as ephemeral nodes (see the package docs)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient

from ...spi import (
    DEFAULT_TIMEOUT,
    Grant,
    LeaseBackend,
    LeaseInfo,
    Member,
    NotificationListener,
    OpenedSession,
    Released,
    Renewal,
    SessionExpired,
    SessionInfo,
    SimbaError,
)
from . import requests
from .acls import AclGuard
from .client import ensure_nodes
from .errors import Deadline, kazoo_errors
from .foreign import ForeignNodes
from .layout import Layout
from .observer import Observer
from .options import parse_options
from .session import ZkSession
from .watchdog import Watchdog


class ZookeeperBackend(LeaseBackend):
    """Each Simba session is a ZooKeeper session on a kazoo client of its own.

    Observation, force-release and notifications go through one more, shared client. Every
    client carries the same credentials and TLS / SASL settings.
    """

    notifies = True
    hands_over = True  # a name's line is a list of sequential nodes (line.py)
    hands_over_always = True
    needs_purge = False  # the server deletes an expired session's nodes itself
    vendor = "zookeeper"
    options_check_id = "django_simba.E014"

    #: ZooKeeper's protocol carries a session timeout as a signed 32-bit count of milliseconds
    #: (kazoo's Connect request): a longer lease could never open a session.
    max_lease_duration = float((2**31 - 1) // 1000)

    @classmethod
    def lease_duration_hint(cls) -> str:
        return (
            "ZooKeeper sends a session timeout as a 32-bit count of milliseconds, and its server "
            "grants at most its maxSessionTimeout (20 ticks, 40 s, unless configured; keep-alives "
            "then follow the shorter grant): use a LEASE_DURATION such as the default, 15 seconds."
        )

    @classmethod
    def options_hint(cls) -> str:
        return "e.g. 'OPTIONS': {'hosts': 'zk1:2181,zk2:2181,zk3:2181'}"

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(options, timeout=timeout)
        self.config = parse_options(self.options, timeout=self.timeout)
        self.layout = Layout(self.config.root)
        self._reset()

    def _reset(self) -> None:
        self._mutex = threading.Lock()
        self._by_id: dict[str, ZkSession] = {}
        self._layout_ready = False
        self._watchdog = Watchdog()
        self._foreign = ForeignNodes()
        self._guard = AclGuard(self.config.security)
        self._acls_checked = False
        self._observer = Observer(self.config, self.layout, self._foreign)

    def _deadline(self) -> Deadline:
        return Deadline(self.timeout)

    def _prepare_layout(self, client: KazooClient, deadline: Deadline) -> None:
        ensure_nodes(client, self.layout.persistent_nodes(), self.config, deadline)
        self._layout_ready = True

    def _prepare_layout_once(self, client: KazooClient, deadline: Deadline) -> None:
        if not self._layout_ready:
            self._prepare_layout(client, deadline)

    def _session(self, session_id: str) -> ZkSession:
        with self._mutex:
            session = self._by_id.get(session_id)
        if session is None:
            # never opened here, or gone: a session lives only in the process that opened it
            raise SessionExpired(session_id)
        return session

    def _forget(self, session: ZkSession) -> None:
        with self._mutex:
            if self._by_id.get(session.session_id) is session:
                del self._by_id[session.session_id]
        self._watchdog.forget(session)

    # -- sessions -------------------------------------------------------------------------

    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession:
        session = ZkSession.open(
            self.config,
            self.layout,
            lease_duration,
            metadata,
            self._deadline(),
            self._prepare_layout_once,
            self._observer.hub.announce,
            self._foreign,
            self._guard,
        )
        if not self._acls_checked:
            try:
                self._check_acls(session)
            except BaseException:
                # Closed before the refusal is raised, not in the background: no session node of it
                # may be listed afterwards. A close that runs late says less than the refusal.
                with contextlib.suppress(SimbaError):
                    session.close(self._deadline(), "its nodes' ACLs were not checked, or are unsafe")
                raise
        with self._mutex:
            self._by_id[session.session_id] = session
        self._watchdog.watch(session)
        return OpenedSession(session.session_id, session.term())

    def _check_acls(self, session: ZkSession) -> None:
        """Refuse the backend's nodes when their ACLs are broader than configured (``acls.py``).

        Once per backend, in one round trip: the root and the nodes under it, and the session
        node just created, whose ACL as the server stored it names the backend's identities.
        """
        if self._guard.active:
            deadline = self._deadline()
            own = self.layout.session(session.session_id)
            paths = [*self.layout.own_nodes(), own]
            looks = session.send(*map(requests.acls, paths))
            with kazoo_errors("reading the ACLs of the backend's nodes"):
                found = {path: session.wait(look, deadline, f"reading the ACL of {path}")[0]
                         for path, look in zip(paths, looks)}  # fmt: skip
            self._guard.learn(own, found.pop(own))
            for path, acl in found.items():
                self._guard.check(path, acl)
        self._acls_checked = True

    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        session = self._session(session_id)
        try:
            return session.keep_alive(lease_duration, self._deadline())
        except SessionExpired:
            session.end("expired")
            self._forget(session)
            raise

    def _close_session(self, session_id: str) -> None:
        with self._mutex:
            session = self._by_id.get(session_id)
        if session is None:
            return
        session.close(self._deadline())  # kept until closed, so a repeated close waits again
        self._forget(session)

    # -- leases ---------------------------------------------------------------------------

    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None:
        session = self._session(session_id)
        try:
            return session.leases.acquire(name, self._deadline(), self._prepare_layout, wait=wait)
        except SessionExpired:
            self._forget(session)
            raise

    def _stop_waiting(self, session_id: str, name: str) -> None:
        with self._mutex:
            session = self._by_id.get(session_id)
        if session is not None:
            session.leases.stop_waiting(name, self._deadline())

    def _release(self, session_id: str, name: str, token: int | None) -> Released:
        with self._mutex:
            session = self._by_id.get(session_id)
        if session is None:
            return Released(held=False)  # never opened here, or ended: it holds nothing
        return session.leases.release(name, self._deadline(), token)

    def _owner(self, name: str) -> LeaseInfo | None:
        return self._observer.owner(name, self._deadline())

    def _leases(self, prefix: str) -> list[LeaseInfo]:
        return self._observer.leases(prefix, self._deadline())

    def _force_release(self, name: str) -> bool:
        return self._observer.force_release(name, self._deadline())

    # -- groups ---------------------------------------------------------------------------

    def _join(self, session_id: str, group: str) -> None:
        session = self._session(session_id)
        try:
            session.groups.join(group, self._deadline(), self._prepare_layout)
        except SessionExpired:
            self._forget(session)
            raise

    def _leave(self, session_id: str, group: str) -> None:
        with self._mutex:
            session = self._by_id.get(session_id)
        if session is not None:
            session.groups.leave(group, self._deadline())

    def _members(self, group: str) -> list[Member]:
        return self._observer.members(group, self._deadline())

    def _groups(self, prefix: str) -> dict[str, list[Member]]:
        return self._observer.groups(prefix, self._deadline())

    # -- operations -----------------------------------------------------------------------

    def _sessions(self) -> list[SessionInfo]:
        return self._observer.sessions(self._deadline())

    def _purge_expired(self, limit: int) -> int:
        """Nothing to purge on the server; forget sessions of this process that ended."""
        with self._mutex:
            ended = [session for session in self._by_id.values() if session.ended]
        for session in ended:
            self._forget(session)
        return 0

    # -- notifications --------------------------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        self._observer.hub.subscribe(listener)
        self._observer.start()

    def watch_lease(self, name: str) -> None:
        self._observer.hub.watch_lease(name)
        self._observer.start()

    def unwatch_lease(self, name: str) -> None:
        self._observer.hub.unwatch_lease(name)

    def watch_group(self, group: str) -> None:
        self._observer.hub.watch_group(group)
        self._observer.start()

    def unwatch_group(self, group: str) -> None:
        self._observer.hub.unwatch_group(group)

    @property
    def notifying(self) -> bool:
        return self._observer.hub.live

    # -- lifecycle ------------------------------------------------------------------------

    def after_fork(self) -> None:
        """Forget the parent's clients, sessions, watchdog and listeners without touching them."""
        self._reset()

    def close(self) -> None:
        """Close every session still open here, the shared client and the watchdog."""
        with self._mutex:
            sessions = list(self._by_id.values())
        for session in sessions:
            session.end("the backend was closed")
        deadline = self._deadline()
        for session in sessions:
            with contextlib.suppress(Exception):  # the server ends it within its timeout
                session.close(deadline)
        self._observer.close(deadline.left())
        self._watchdog.stop()
        self._reset()
