"""The django-health-check plugin, through the health check view and on its own."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.test import override_settings
from django.urls import path

from django_simba import registry
from django_simba.testing import wait_until
from tests.django.engines import reset_engine

views = pytest.importorskip("health_check.views")
exceptions = pytest.importorskip("health_check.exceptions")
SimbaSession = pytest.importorskip("django_simba.integrations.health_check").SimbaSession
ServiceUnavailable, ServiceWarning = exceptions.ServiceUnavailable, exceptions.ServiceWarning
HealthCheckView = views.HealthCheckView

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 2, "RENEW_INTERVAL": 0.5, "AUTOSTART": False}

# The module's path, and (for the second view) the older one it moved from.
CHECK = "django_simba.integrations.health_check.SimbaSession"
urlpatterns = [
    path("health/", HealthCheckView.as_view(checks=[CHECK])),
    path("health-no-start/", HealthCheckView.as_view(checks=[(CHECK, {"start": False})])),
]


@pytest.fixture(autouse=True)
def memory_backend():
    with override_settings(SIMBA=SIMBA, ROOT_URLCONF=__name__):
        yield
        reset_engine()


def result(check: SimbaSession):
    return asyncio.run(check.get_result()).error


def test_reports_a_live_session_through_the_view(client):
    response = client.get("/health/", {"format": "json"})
    assert response.status_code == 200, response.content
    assert list(json.loads(response.content).values()) == ["OK"]
    assert registry.get_engine().session_id is not None


def test_unavailable_when_the_engine_is_not_started_and_may_not_be(client):
    response = client.get("/health-no-start/", {"format": "json"})
    assert response.status_code == 500
    assert "not started" in next(iter(json.loads(response.content).values()))


def test_invalid_settings_say_there_is_no_engine_not_unknown_error(client):
    """``get_engine()`` raised outside the check's own handling: the page said "unknown error"."""
    with override_settings(SIMBA={**SIMBA, "LEASE_DURATON": 3}):
        response = client.get("/health/", {"format": "json"})
    assert response.status_code == 500
    [said] = json.loads(response.content).values()
    assert said == "Unavailable: no Simba engine (ConfigurationError)"


def test_warns_when_keep_alives_are_late_then_fails_past_the_deadline():
    engine = registry.get_engine().start()
    engine.wait_for_session(5)
    assert result(SimbaSession()) is None
    # The keep-alive thread stalls (a paused process, a hogged interpreter): trust runs down.
    engine.runtime.stop(5)
    warning = wait_until(lambda: result(SimbaSession(wait=0)), 5, message="a warning")
    assert isinstance(warning, ServiceWarning) and "keep-alives are late" in warning.message
    failure = wait_until(
        lambda: isinstance(error := result(SimbaSession(wait=0)), ServiceUnavailable) and error, 5
    )
    assert "passed its deadline" in failure.message


def test_a_session_the_server_grants_shorter_than_asked_is_healthy_while_renewed():
    """The backend grants 2.4 s where 8 are asked: keep-alives follow (every 0.6 s) and the
    session, trusted for 1.8 s to 2.4 s, is never reported late against the 2 s RENEW_INTERVAL."""
    with override_settings(SIMBA={**SIMBA, "LEASE_DURATION": 8, "RENEW_INTERVAL": 2}):
        reset_engine()
        engine = registry.get_engine()
        engine.backend.max_session = 2.4
        engine.start().wait_for_session(5)
        assert engine.renew_every == pytest.approx(0.6)
        renewals: list[float] = []
        keep_alive = engine.backend.keep_alive

        def counted(session_id: str, lease_duration: float) -> object:
            renewals.append(lease_duration)
            return keep_alive(session_id, lease_duration)

        engine.backend.keep_alive = counted  # type: ignore[method-assign]
        seen = []  # asked over five renewals, however long a loaded machine takes for them
        wait_until(lambda: seen.append(result(SimbaSession(wait=0))) or len(renewals) >= 5, 30)
        assert not [error for error in seen if error is not None], {str(e) for e in seen if e}
