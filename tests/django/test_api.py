"""The public API on the memory backend through settings (the real backends have their own tests)."""

from __future__ import annotations

import pytest
from django.test import override_settings

import django_simba
from django_simba import election, group, leases, lock, owner, registry, signals
from django_simba.testing import wait_until

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "api-tests"}


@pytest.fixture(autouse=True)
def fresh_engine():
    with override_settings(SIMBA=SIMBA):
        yield
    registry.reset()


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

    signals.elected.connect(on_elected)
    signals.revoked.connect(on_revoked)
    try:
        e = election("scheduler")
        wait_until(lambda: e.is_leader, 5, message="elected")
        e.close()
        wait_until(lambda: len(seen) == 2, 5, message="signals")
        assert seen == [("elected", "election", 1), ("revoked", "election", 1, "released")]
    finally:
        signals.elected.disconnect(on_elected)
        signals.revoked.disconnect(on_revoked)


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
