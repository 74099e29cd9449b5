"""The session keeper: one session per process, opened, renewed, and given up on time.

A session is trusted until a local deadline, ``sent_at + remaining * (1 - drift)``,
counted from when its open (or last renewal) was sent. A keep-alive that fails or takes
longer than the renew interval extends nothing; once the deadline passes, every term of
the session ends and a new session is opened. The parts that live on the session (the
lines of names, group membership) hear of it through the hooks set by the engine.

Keep-alives follow what the backend granted, not what was asked: a server may grant a
shorter session than ``LEASE_DURATION`` (ZooKeeper clamps it to ``maxSessionTimeout``), and
renewing on the configured interval would then miss every deadline. The next keep-alive is
due after ``remaining * RENEW_INTERVAL / LEASE_DURATION`` (never later than the renew
interval), the ratio the settings chose, and a grant shorter than asked is logged once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EngineClosed
from ..spi import BackendUnavailable, OpenedSession, Renewal, SessionExpired
from .context import Context, ignore
from .runtime import CONTEND_LANE, SESSION_LANE, Outcome
from .term import EndReason

logger = logging.getLogger("django_simba.engine")

#: First retry delay after a failed open; doubles up to the renew interval.
FIRST_OPEN_RETRY = 0.1
#: A grant shorter than asked by more than this fraction is logged (replies measured in whole
#: milliseconds, or a moment after the server decided, are a little short without being capped).
SHORT_GRANT_TOLERANCE = 0.01


@dataclass(slots=True)
class Session:
    id: str
    deadline: float
    #: How long after a keep-alive was sent the next one is due: set by the last grant.
    renew_every: float
    keep_alive_in_flight: bool = False


#: (session id, when the keep-alive was sent, its reply, the deadline it earned or None)
RenewedHook = Callable[[str, float, Renewal, "float | None"], None]


class SessionKeeper:
    """Opens the session, keeps it alive, and gives it up on time (every method: mutex held)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.session: Session | None = None
        self.started = False
        self.closed = False
        self._opening = False
        self._open_retry = FIRST_OPEN_RETRY
        self._last_purge: float | None = None
        self._short_grant_logged = False
        self._changed = threading.Condition(context.mutex)
        self._waiters: list[Callable[[str | None], None]] = []  # one-shot: a session id, or None (closed)
        # Set by the engine: what the other parts do when the session changes.
        self.on_opened: list[Callable[[Session], None]] = []
        self.on_renewed: list[RenewedHook] = []
        self.on_lost: list[Callable[[str, EndReason], None]] = []

    # -- waiting for a session ---------------------------------------------------------

    def wait(self, timeout: float | None) -> str:
        """Block until a session is live (mutex held; the wait releases it)."""
        context = self.context
        deadline = None if timeout is None else context.now() + timeout
        while self.session is None:
            if self.closed:
                raise EngineClosed("this engine was closed")
            remaining = None if deadline is None else deadline - context.now()
            if remaining is not None and remaining <= 0:
                raise self.no_session()
            self._changed.wait(remaining)
        return self.session.id

    def when_live(self, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(session_id)`` once a session is live; ``callback(None)`` if the engine closes."""
        if self.session is not None:
            callback(self.session.id)
        elif self.closed:
            callback(None)
        else:
            self._waiters.append(callback)

    def forget_waiter(self, callback: Callable[[str | None], None]) -> None:
        if callback in self._waiters:
            self._waiters.remove(callback)

    def no_session(self) -> BackendUnavailable:
        vendor = self.context.backend.vendor
        return BackendUnavailable(
            f"no session could be opened on the {vendor} backend: {self.context.last_error or 'still trying'}"
        )

    def _changed_now(self) -> None:
        self._changed.notify_all()
        waiters, self._waiters = self._waiters, []
        session_id = self.session.id if self.session is not None else None
        if session_id is None and not self.closed:
            self._waiters = waiters  # lost, not closed: they wait for the next one
            return
        for waiter in waiters:
            waiter(session_id)

    # -- opening -----------------------------------------------------------------------

    def open(self) -> None:
        if self.closed or self._opening or self.session is not None or not self.started:
            return
        self._opening = True
        context = self.context
        sent = context.now()
        lease, metadata = context.config.lease_duration, context.config.session_metadata()
        context.runtime.submit(
            SESSION_LANE,
            lambda: context.backend.open_session(lease, metadata),
            lambda outcome: self.context.with_mutex(self._on_opened, sent, outcome),
        )

    def _on_opened(self, sent: float, outcome: Outcome[OpenedSession]) -> None:
        context = self.context
        sent = outcome.sent_at(sent)
        self._opening = False
        if outcome.error is not None or outcome.value is None:
            delay = self._open_retry * (0.5 + context.runtime.random.random())
            self._open_retry = min(self._open_retry * 2, context.config.renew_interval)
            what = f"cannot open a session on the {context.backend.vendor} backend ({outcome.error})"
            context.failed(outcome.error, f"{what}; retrying in {delay:.2f} s")
            context.runtime.call_later(delay, lambda: context.with_mutex(self.open))
            return
        opened = outcome.value
        if self.closed:
            context.runtime.submit(
                CONTEND_LANE, lambda: context.backend.close_session(opened.session_id), ignore
            )
            return
        self._open_retry = FIRST_OPEN_RETRY
        context.last_error = None
        session = Session(
            opened.session_id,
            context.config.trusted_until(sent, opened.remaining),
            self._renew_every(opened.remaining),
        )
        self.session = session
        context.answered()
        logger.info("django-simba: session %s opened on the %s backend", session.id, context.backend.vendor)
        context.notify_observers("session_opened", session.id)
        self._changed_now()
        self._schedule_keep_alive(session.id, sent + session.renew_every - context.now())
        self._arm_deadline(session)
        for hook in self.on_opened:
            hook(session)
        self.maybe_purge()

    # -- keeping it alive --------------------------------------------------------------

    def _renew_every(self, granted: float) -> float:
        """The keep-alive interval a grant of ``granted`` seconds calls for (see the module docs)."""
        config = self.context.config
        asked = config.lease_duration
        if granted < asked * (1 - SHORT_GRANT_TOLERANCE) and not self._short_grant_logged:
            self._short_grant_logged = True
            vendor = self.context.backend.vendor
            logger.warning(
                "django-simba: the %s backend granted a session of %.3g s where LEASE_DURATION asks "
                "for %.3g s (a server limit, such as ZooKeeper's maxSessionTimeout, caps it): "
                "keep-alives follow the grant, every %.3g s instead of every %.3g s; raise the "
                "server's limit or lower LEASE_DURATION (logged once)",
                vendor,
                granted,
                asked,
                max(0.0, granted) * config.renew_interval / asked,
                config.renew_interval,
            )
        return min(config.renew_interval, max(0.0, granted) * config.renew_interval / asked)

    def _schedule_keep_alive(self, session_id: str, delay: float) -> None:
        context = self.context
        context.runtime.call_later(delay, lambda: context.with_mutex(self._keep_alive, session_id))

    def _arm_deadline(self, session: Session) -> None:
        context = self.context
        context.runtime.call_later(
            session.deadline - context.now(), lambda: context.with_mutex(self._check_deadline, session.id)
        )

    def _keep_alive(self, session_id: str) -> None:
        session = self.session
        if session is None or session.id != session_id or session.keep_alive_in_flight:
            return
        session.keep_alive_in_flight = True
        context = self.context
        sent = context.now()
        lease = context.config.lease_duration
        context.runtime.submit(
            SESSION_LANE,
            lambda: context.backend.keep_alive(session_id, lease),
            lambda outcome: self.context.with_mutex(self._on_kept_alive, session_id, sent, outcome),
        )

    def _on_kept_alive(self, session_id: str, sent: float, outcome: Outcome[Renewal]) -> None:
        context = self.context
        sent = outcome.sent_at(sent)
        session = self.session
        if session is None or session.id != session_id:
            return
        session.keep_alive_in_flight = False
        elapsed = context.now() - sent
        renewal = outcome.value
        renew_interval = context.config.renew_interval
        in_time = renewal is not None and elapsed <= renew_interval
        context.notify_observers("keep_alive_done", elapsed, in_time)
        if renewal is not None or isinstance(outcome.error, SessionExpired):
            context.answered()
        if isinstance(outcome.error, SessionExpired):
            self.lose(session_id, EndReason.SESSION_EXPIRED)
            return
        if renewal is None:
            context.failed(outcome.error, f"keep-alive of session {session_id} failed: {outcome.error}")
            self._schedule_keep_alive(session_id, session.renew_every / 2)
            return
        deadline = context.config.trusted_until(sent, renewal.remaining)
        if in_time:
            session.deadline = max(session.deadline, deadline)
            session.renew_every = self._renew_every(renewal.remaining)
        else:
            # Counts as failed: extend nothing, but a lease missing from the reply is still lost.
            logger.warning("django-simba: keep-alive of session %s took %.3f s", session_id, elapsed)
        for hook in self.on_renewed:
            hook(session_id, sent, renewal, deadline if in_time else None)
        next_in = sent + session.renew_every - context.now()
        self._schedule_keep_alive(session_id, next_in if in_time else session.renew_every / 2)
        self.maybe_purge()

    def _check_deadline(self, session_id: str) -> None:
        session = self.session
        if session is None or session.id != session_id:
            return
        if self.context.now() >= session.deadline:
            logger.warning("django-simba: session %s passed its local deadline", session_id)
            self.lose(session_id, EndReason.DEADLINE)
        else:
            self._arm_deadline(session)

    # -- giving it up ------------------------------------------------------------------

    def lose(self, session_id: str, reason: EndReason) -> None:
        """End every term of the session and open a new one."""
        session = self.session
        if session is None or session.id != session_id:
            return
        context = self.context
        self.session = None
        for hook in self.on_lost:
            hook(session_id, reason)
        context.notify_observers("session_lost", session_id, reason)
        if reason is EndReason.DEADLINE:
            # It may still be live on the backend: close it so its leases free at once.
            context.runtime.submit(CONTEND_LANE, lambda: context.backend.close_session(session_id), ignore)
        self._changed_now()
        self.open()

    def close(self) -> Session | None:
        """The engine closes: no session any more, nor ever again; return the one to close."""
        self.closed = True
        session, self.session = self.session, None
        self._changed_now()
        return session

    def maybe_purge(self) -> None:
        # Every backend decides what purging means (rows of crashed sessions, stale group entries).
        context = self.context
        now = context.now()
        if self._last_purge is not None and now - self._last_purge < context.config.purge_interval:
            return
        self._last_purge = now
        context.runtime.submit(CONTEND_LANE, context.backend.purge_expired, _log_purge)


def _log_purge(outcome: Outcome[int]) -> None:
    if outcome.error is not None:
        logger.warning("django-simba: purging expired sessions failed: %s", outcome.error)
    elif outcome.value:
        logger.info("django-simba: purged %d expired sessions", outcome.value)
