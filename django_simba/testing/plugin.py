"""The pytest plugin for projects that use django-simba (loaded by itself; ``-p no:django_simba``).

* Every test starts and ends without an engine: the process's engine (its session, its
  keep-alive thread, its connections) is closed before each test and after it, before any
  fixture is torn down, so before pytest-django flushes the tables of a ``transaction=True``
  test. A test that uses a lock, an election or a group starts a fresh engine on first use,
  on the settings of that moment (its test database, an ``override_settings``).
* Where the database backend keeps its tables in an alias of their own (SQLite's documented
  setup), every ``django_db`` test also gets that alias's test database: the tables are
  created there once per run, and no test ever takes a lock in the real file.
* Fixtures: ``simba_engine`` (the process's engine, started), ``simba_memory`` (the memory
  backend for one test) and ``simba_process`` (another real process on the same backend, to
  hold names and lead elections while the test's code contends with it).

Importing this module imports neither Django nor the rest of the test kit: it is loaded in
every pytest run of an environment where django-simba is installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..engine import Engine
    from .process import OtherProcess


def _django_ready() -> bool:
    try:
        from django.apps import apps
    except ImportError:
        return False
    return apps.ready


def reset_engine() -> None:
    """Close the process's engine, if one was built; the next use builds it anew."""
    if not _django_ready():
        return
    from .. import registry

    registry.reset()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    reset_engine()  # one built at import or collection time must not serve a test


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # Before the fixtures' teardown: no keep-alive may write while a flush empties the tables.
    reset_engine()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not _django_ready():
        return
    from ..routers import simba_alias

    alias = simba_alias()
    if alias is None:
        return
    try:
        from pytest_django.fixtures import validate_django_db
    except ImportError:
        return
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is None:
            continue
        transaction, reset_sequences, databases, serialized_rollback, available_apps = validate_django_db(
            marker
        )
        if databases == "__all__":
            continue
        wanted = list(databases or ["default"])
        if alias in wanted:
            continue
        item.add_marker(
            pytest.mark.django_db(
                transaction=transaction,
                reset_sequences=reset_sequences,
                databases=[*wanted, alias],
                serialized_rollback=serialized_rollback,
                available_apps=available_apps,
            ),
            append=False,  # the closest marker, the one pytest-django reads
        )


@pytest.fixture
def simba_engine() -> Iterator[Engine]:
    """The process's engine on the current settings, started, with its session open."""
    from .. import registry

    engine = registry.get_engine()
    engine.wait_for_session(engine.backend.timeout * 2)
    yield engine
    registry.reset()


@pytest.fixture
def simba_memory() -> Iterator[Engine]:
    """The memory backend for this test (one process; nothing touches a database)."""
    from django.test import override_settings

    from .. import registry
    from ..conf import get_settings

    current = get_settings()
    memory = {
        "BACKEND": "memory",
        "LEASE_DURATION": current.lease_duration,
        "RENEW_INTERVAL": current.renew_interval,
        "AUTOSTART": False,
    }
    with override_settings(SIMBA=memory):
        yield registry.get_engine()


@pytest.fixture
def simba_process() -> Iterator[OtherProcess]:
    """Another process on this test's backend (same settings, same test databases).

    ``hold(name)`` makes it take a lock and keep it, ``lead(name)`` win an election,
    ``release(name)`` / ``resign(name)`` give them up, ``join(group)`` join a group and
    ``kill()`` end it with SIGKILL (its session then expires). Stopped after the test.
    """
    from .process import OtherProcess

    other = OtherProcess.start()
    try:
        yield other
    finally:
        other.stop()
