"""The public API on the memory backend through settings (the real backends have their own tests)."""

from __future__ import annotations

import pytest

import django_simba
from django_simba import election, group, leases, lock, owner, signals
from django_simba.testing import wait_until
from tests.django.engines import fresh_engine_on

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "api-tests"}


fresh_engine = fresh_engine_on(SIMBA)


def test_lock_owner_and_leases():
    with lock("invoices:42", timeout=5) as term:
        info = owner("invoices:42")
        assert info.token == term.token and info.metadata == "api-tests"
        assert [i.name for i in leases("invoices:")] == ["invoices:42"]
    assert owner("invoices:42") is None


def test_election_and_signals():
    seen = []

    def on_elected(sender, kind, term, **kwargs):
        seen.append(("elected", kind, term.token))

    def on_revoked(sender, kind, term, reason, **kwargs):
        seen.append(("revoked", kind, term.token, reason.value))

    signals.term_started.connect(on_elected)
    signals.term_ended.connect(on_revoked)
    try:
        e = election("scheduler")
        wait_until(lambda: e.is_leader, 5, message="elected")
        e.close()
        wait_until(lambda: len(seen) == 2, 5, message="signals")
        assert seen == [("elected", "election", 1), ("revoked", "election", 1, "released")]
    finally:
        signals.term_started.disconnect(on_elected)
        signals.term_ended.disconnect(on_revoked)


def test_signals_without_receivers_wake_no_callback_thread(monkeypatch):
    """Nothing connected: a lock cycle queues nothing for the signals; a receiver connected later hears."""
    engine = django_simba.registry.get_engine()
    queued = []
    run_callback = engine.runtime.run_callback
    monkeypatch.setattr(engine.runtime, "run_callback", lambda fn: (queued.append(fn), run_callback(fn)))
    for _ in range(3):
        with lock("signals:quiet", timeout=5):
            pass
    assert queued == []

    heard = []

    def on_started(sender, kind, term, **kwargs):
        heard.append((kind, term.name))

    signals.term_started.connect(on_started)
    try:
        with lock("signals:heard", timeout=5):
            pass
        wait_until(lambda: heard == [("lock", "signals:heard")], 5, message="the receiver heard the grant")
        assert len(queued) == 1  # the grant; its end has no receiver
    finally:
        signals.term_started.disconnect(on_started)


def test_group():
    g = group("workers")
    g.join()
    assert len(g.members()) == 1
    g.leave()
    assert g.members() == []


def test_package_exposes_errors_without_django_layer():
    assert issubclass(django_simba.LockTimeout, django_simba.SimbaError)
    assert issubclass(django_simba.InvalidName, ValueError)
    with pytest.raises(AttributeError):
        django_simba.no_such_name  # noqa: B018
