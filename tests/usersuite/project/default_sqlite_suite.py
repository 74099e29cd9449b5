"""The shop's suite on SQLite with the default settings (``SHOP_DB=sqlite-default``): pytest-django's
in-memory test database, django-simba's tables in it beside the shop's. Run on its own (its name
is not a ``check_*.py``).

A test's transaction that wrote holds the database's one write lock until the test ends: a lock
taken after the write can never be granted, so it fails at once with the ConfigurationError that
names the fix, whether the session is open yet or not, with a timeout or without.
"""

import pytest
from shop.models import Invoice

from django_simba import lock
from django_simba.errors import ConfigurationError

FIX = "Give the tables a SQLite file of their own"


@pytest.mark.django_db
def test_a_lock_before_the_tests_first_write_works(name: str) -> None:
    with lock(name, timeout=5) as term:
        assert term.is_valid()
    Invoice.objects.create()


@pytest.mark.timeout(60)
@pytest.mark.django_db
@pytest.mark.parametrize("timeout", [5, None])
def test_a_write_then_a_lock_fails_at_once_naming_the_fix(name: str, timeout: float | None) -> None:
    Invoice.objects.create()
    with pytest.raises(ConfigurationError, match=FIX):
        lock(name, timeout=timeout).acquire()  # the session is still to be opened


@pytest.mark.timeout(60)
@pytest.mark.django_db
@pytest.mark.parametrize("timeout", [5, None])
def test_with_the_session_open_a_write_then_a_lock_fails_at_once(name: str, timeout: float | None) -> None:
    with lock(name, timeout=5):
        pass  # the session opens before the write
    Invoice.objects.create()
    with pytest.raises(ConfigurationError, match=FIX):
        lock(name, timeout=timeout).acquire()


@pytest.mark.django_db(transaction=True)
def test_with_transaction_true_a_write_then_a_lock_works(name: str) -> None:
    Invoice.objects.create()  # committed at once: no transaction holds the lock
    with lock(name, timeout=None) as term:
        assert term.is_valid()
