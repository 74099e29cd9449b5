"""Group membership of this process: joined now, and again in every later session.

A membership lives exactly as long as the session that made it, so each group this
process joined is joined again by every new session, until the last local joiner leaves.

A join or leave whose reply never came may still be applied later (a request delayed on
its way): a late leave would undo a later join. So for a while after such a call, every
renewal of the session says again what this process wants of the group (join or leave;
both are idempotent). The while is a lease plus three call timeouts: the backends close a
connection whose call timed out, so a request still on its way lands within a few timeouts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..spi import BackendUnavailable, Renewal, SessionExpired, redact, validate_name
from .context import Context, ignore
from .keeper import Session, SessionKeeper
from .runtime import CONTEND_LANE, Outcome
from .term import EndReason

logger = logging.getLogger("django_simba.engine")


class Membership:
    """The groups joined here, with how many local joiners each has."""

    def __init__(
        self, context: Context, keeper: SessionKeeper, wait_for_session: Callable[[float | None], str]
    ):
        self.context = context
        self.keeper = keeper
        self._wait_for_session = wait_for_session
        self._joined: dict[str, int] = {}  # group -> local joiners
        self._uncertain: dict[str, float] = {}  # group -> until when a call of unknown outcome may land

    def join(self, group: str, session_wait: float | None) -> None:
        """Join ``group`` now and in every later session (mutex not held)."""
        validate_name(group)
        context = self.context
        deadline = None if session_wait is None else context.now() + session_wait
        with context.mutex:
            # Counted first, so a session opened while this join runs joins the group too.
            self._joined[group] = self._joined.get(group, 0) + 1
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - context.now())
                session_id = self._wait_for_session(wait)
                try:
                    context.backend.join(session_id, group)
                    return
                except SessionExpired:
                    with context.mutex:
                        self.keeper.lose(session_id, EndReason.SESSION_EXPIRED)
        except BaseException as error:
            with context.mutex:
                self._forget(group)
                self._maybe_landing_later(group, error)
            raise

    def leave(self, group: str) -> None:
        """One local joiner less; the last one leaves on the backend (mutex not held)."""
        validate_name(group)
        with self.context.mutex:
            if not self._forget(group):
                return
            session = self.keeper.session
        if session is not None:
            try:
                self.context.backend.leave(session.id, group)
            except BaseException as error:
                with self.context.mutex:
                    self._maybe_landing_later(group, error)
                raise

    def _maybe_landing_later(self, group: str, error: BaseException) -> None:
        """A call that failed without saying whether it was applied may still land (mutex held)."""
        if isinstance(error, BackendUnavailable):  # a timeout, a lost connection: outcome unknown
            context = self.context
            call_timeout = max(context.backend.timeout, context.config.renew_interval)  # its default
            doubt = context.config.lease_duration + 3 * call_timeout
            self._uncertain[group] = context.now() + doubt

    def _forget(self, group: str) -> bool:
        """Count one local joiner less; True when it was the last (mutex held)."""
        count = self._joined.get(group, 0)
        if count > 1:
            self._joined[group] = count - 1
            return False
        self._joined.pop(group, None)
        return True

    def session_renewed(self, session_id: str, sent: float, renewal: Renewal, deadline: float | None) -> None:
        """Hook of the keeper (mutex held): say again what is wanted of groups with a call in doubt."""
        now = self.context.now()
        for group, until in list(self._uncertain.items()):
            if until < now:
                del self._uncertain[group]
            elif group in self._joined:
                self._submit_join(session_id, group)
            else:
                self._submit_leave(session_id, group)

    def resync(self) -> None:
        """The backend may have lost what it knew (a failover to a replica that missed the last
        writes, a reconnection): join every group joined here again (mutex held; joins are idempotent).

        The session can survive such a loss while a membership written after it does not, and
        nothing else would tell: the keep-alive's reply lists leases only.
        """
        session = self.keeper.session
        if session is not None:
            for group in self._joined:
                self._submit_join(session.id, group)

    def _submit_leave(self, session_id: str, group: str) -> None:
        backend = self.context.backend
        self.context.runtime.submit(CONTEND_LANE, lambda: backend.leave(session_id, group), ignore)

    def session_opened(self, session: Session) -> None:
        """Hook of the keeper (mutex held): the new session joins every group joined here."""
        for group in self._joined:
            self._submit_join(session.id, group)

    def _submit_join(self, session_id: str, group: str) -> None:
        context = self.context

        def on_done(outcome: Outcome[None]) -> None:
            if outcome.error is not None and not isinstance(outcome.error, SessionExpired):
                failure = redact(outcome.error)
                logger.warning("django-simba: rejoining %r failed (%s); retrying", group, failure)
                context.runtime.call_later(
                    context.config.renew_interval / 2, lambda: self._rejoin(session_id, group)
                )

        context.runtime.submit(CONTEND_LANE, lambda: context.backend.join(session_id, group), on_done)

    def _rejoin(self, session_id: str, group: str) -> None:
        with self.context.mutex:
            session = self.keeper.session
            if session is not None and session.id == session_id and group in self._joined:
                self._submit_join(session_id, group)
