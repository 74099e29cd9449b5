"""Prometheus metrics fed by the engine's observer hooks, on a registry of the test's own."""

from __future__ import annotations

import gc

import pytest
from django.test import override_settings

from django_simba import LeaseLost, registry
from django_simba.integrations.prometheus import PrometheusObserver, install_metrics, metrics_for
from django_simba.testing import wait_until
from tests.django.engines import reset_engine

prometheus_client = pytest.importorskip("prometheus_client")

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 2, "RENEW_INTERVAL": 0.5, "METADATA": "metrics-tests"}


@pytest.fixture
def engine():
    with override_settings(SIMBA=SIMBA):
        engine = registry.get_engine()
        yield engine
        reset_engine()


@pytest.fixture
def prom(engine):
    """The engine's metrics, on a fresh registry; ``value(name, **labels)`` reads one sample."""
    collector = prometheus_client.CollectorRegistry()
    # the registry installed metrics on the default collector; measure on our own instead
    engine.observers[:] = [o for o in engine.observers if not isinstance(o, PrometheusObserver)]
    assert install_metrics(engine, collector)
    assert install_metrics(engine, collector)  # idempotent
    assert sum(isinstance(o, PrometheusObserver) for o in engine.observers) == 1

    def value(name: str, **labels: str) -> float:
        return collector.get_sample_value(name, {"backend": "memory", **labels}) or 0.0

    return value


def test_sessions_and_keep_alives(engine, prom):
    engine.start()
    wait_until(lambda: prom("simba_session_live") == 1, 5, message="session metric")
    assert prom("simba_sessions_opened_total") == 1
    wait_until(lambda: prom("simba_keepalive_seconds_count") >= 2, 5, message="two keep-alives")
    assert prom("simba_keepalive_seconds_bucket", le="+Inf") == prom("simba_keepalive_seconds_count")
    assert 0 <= prom("simba_keepalive_seconds_sum") < 1
    assert prom("simba_keepalive_failures_total") == 0


def test_terms_won_held_and_lost(engine, prom):
    with engine.lock("jobs:a", timeout=5):
        wait_until(lambda: prom("simba_terms_held", kind="lock") == 1, 5, message="held")
    wait_until(lambda: prom("simba_terms_held", kind="lock") == 0, 5, message="released")
    assert prom("simba_terms_won_total", kind="lock") == 1
    assert prom("simba_terms_lost_total", kind="lock", reason="released") == 0

    election = engine.election("scheduler")
    wait_until(lambda: election.is_leader, 5, message="elected")
    engine.backend.force_release("scheduler")  # an operator takes it away: lost at the next keep-alive
    taken = lambda: prom("simba_terms_lost_total", kind="election", reason="taken") == 1  # noqa: E731
    wait_until(taken, 5, message="lost")
    wait_until(lambda: prom("simba_terms_won_total", kind="election") == 2, 5, message="re-elected")
    election.close()


def test_a_lost_session_counts_a_failed_keep_alive(engine, prom):
    lock = engine.lock("jobs:b", timeout=5)
    lock.acquire()
    first = engine.session_id
    engine.backend.lose_sessions()  # the backend forgets every session (a restart without data)
    wait_until(lambda: prom("simba_sessions_lost_total", reason="session expired") == 1, 5, message="lost")
    with pytest.raises(LeaseLost):  # the holder learns its term ended
        lock.release()
    assert prom("simba_keepalive_failures_total") >= 1
    assert prom("simba_terms_lost_total", kind="lock", reason="session expired") == 1
    wait_until(lambda: prom("simba_sessions_opened_total") == 2 and prom("simba_session_live") == 1, 5)
    assert engine.session_id != first


def test_metric_families_are_registered_once_per_registry():
    collector = prometheus_client.CollectorRegistry()
    assert metrics_for(collector) is metrics_for(collector)
    assert metrics_for(collector) is not metrics_for(prometheus_client.CollectorRegistry())


def test_a_new_registry_never_inherits_the_families_of_a_collected_one():
    # CPython reuses the address (id) of a collected object at once: keyed by id(), a new
    # registry would get families registered on a dead one, and its samples would stay empty.
    for attempt in range(8):
        collector = prometheus_client.CollectorRegistry()
        metrics_for(collector).sessions_opened.labels("memory").inc()
        sample = collector.get_sample_value("simba_sessions_opened_total", {"backend": "memory"})
        assert sample == 1.0, f"attempt {attempt}: the families are not on this registry"
        del collector
        gc.collect()


def test_on_lost_the_term_lost_signal_and_the_metric_count_the_same_losses(engine, prom):
    """One rule (``EndReason.is_loss``): a term the engine's close ended under its holder counts for all."""
    from django_simba.signals import term_lost

    heard: list[str] = []

    def on_signal(sender, kind, term, reason, **kwargs):
        heard.append(f"signal {reason.value}")

    term_lost.connect(on_signal, dispatch_uid="test_metrics.losses")
    try:
        on_lost = lambda term, reason: heard.append(f"on_lost {reason.value}")  # noqa: E731
        held = engine.lock("metrics:closing", on_lost=on_lost)
        held.acquire(5)
        engine.close()
        wait_until(lambda: len(heard) == 2, 5, message="on_lost and the signal")
    finally:
        term_lost.disconnect(dispatch_uid="test_metrics.losses")
    assert sorted(heard) == ["on_lost engine closed", "signal engine closed"]
    assert prom("simba_terms_lost_total", kind="lock", reason="engine closed") == 1
