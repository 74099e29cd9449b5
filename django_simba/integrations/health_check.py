"""A django-health-check (4.x) check reporting this process's Simba session.

Add ``"health_check"`` to ``INSTALLED_APPS`` (its page's templates are there), then::

    # urls.py
    from health_check.views import HealthCheckView

    urlpatterns = [
        path("health/", HealthCheckView.as_view(checks=[
            "health_check.checks.Database",
            "django_simba.integrations.health_check.SimbaSession",
        ])),
    ]

Unavailable when the process has no live session (the backend cannot be
reached, the settings are invalid, or the engine was never started and ``start``
is False); a warning
when the session is live but its local deadline is less than one renew
interval away, which means keep-alives are failing or late.

django-health-check logs a failed check with its traceback on its ``health_check``
logger; importing this module masks the credentials of that logger's records as
django-simba's own (:mod:`django_simba.redacted_logs`).
"""

from __future__ import annotations

import dataclasses
import datetime

from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable, ServiceWarning

from ..redacted_logs import redact_records_of
from ..spi import SimbaError, format_duration

redact_records_of("health_check")  # its failures' tracebacks: ours chained under its exceptions


@dataclasses.dataclass
class SimbaSession(HealthCheck):  # type: ignore[misc]  # health_check ships no types
    """The process's session is live and kept alive in time.

    ``start``: start the engine if nothing started it yet (the first probe then
    waits up to ``wait`` seconds for the session to open).
    """

    start: bool = True
    wait: float = dataclasses.field(default=3.0, repr=False)
    timeout: datetime.timedelta = dataclasses.field(default=datetime.timedelta(seconds=5), repr=False)

    def run(self) -> None:
        from ..registry import get_engine, peek_engine

        engine = peek_engine()
        if engine is None or not engine.started or engine.closed:
            if not self.start:
                raise ServiceUnavailable("the Simba engine is not started in this process")
            try:
                engine = get_engine()
            except SimbaError as error:  # invalid settings: a check failed, not the health check
                raise ServiceUnavailable(f"no Simba engine ({type(error).__name__})") from error
        vendor = engine.backend.vendor
        try:
            engine.wait_for_session(self.wait)
        except SimbaError as error:
            # The class name only: a driver's message may name hosts or users.
            raise ServiceUnavailable(
                f"no live session on the {vendor} backend ({type(error).__name__})"
            ) from error
        deadline = engine.session_deadline
        trusted = 0.0 if deadline is None else deadline - engine.now()
        if trusted <= 0:
            raise ServiceUnavailable(f"the session on the {vendor} backend passed its deadline")
        if trusted < engine.renew_every:  # a server's short grant shortens it (engine/keeper.py)
            trust = format_duration(trusted)
            raise ServiceWarning(f"keep-alives are late: the session is trusted for {trust} only")

    def pretty_status(self) -> str:
        return "OK"
