"""Which tier a test is in, decided at collection from where it lives and what it needs.

* ``fast``: the engine, the memory backend, SQLite, the Django layer on SQLite and a short
  seed sweep. No server, no compiler, no browser: ``python -m pytest -m fast`` with only the
  ``test`` extra installed.
* ``integration``: the rest of the full tier. Servers, the fault trials, real workers and
  servers of the deploy tests, the browser, the 2,000-seed sweep (the ``test-integration``
  extra and the servers of ``.ci/services``).

A test is ``integration`` when it lives under :data:`INTEGRATION_PATHS`, carries one of
:data:`INTEGRATION_MARKERS` (its server's marker, on the test, its class, its module or its
parameter, or given for a fixture of :data:`SERVER_FIXTURES` or a database of its
``django_db`` mark) or uses one of :data:`INTEGRATION_FIXTURES`; every other test is
``fast``. So a new test lands in its tier with no mark of its own (one that needs something
none of these says, a compiler for instance, is marked ``integration`` where it is written).
Tests under :data:`DJANGO_VERSION_PATHS` are also ``django_version``: what may differ between
Django versions, which the second CI row runs again (with the fast tier) on the other Django.
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: Everything under these needs a server, real workers, a browser, a compiler or a package of
#: the test-integration extra (their modules import redis, kazoo, psycopg, selenium...).
INTEGRATION_PATHS = (
    "backends/redis",
    "backends/zookeeper",
    "backends/database/test_pgbouncer.py",
    "deploy",
    "faults",
    "usersuite",
    "django/test_browser.py",
    "django/test_task_queues.py",
    "test_benchmarks_smoke.py",
)
#: Fixtures that give a test a server, and that server's marker (added to the test's own).
SERVER_FIXTURES = {
    "redis_server": "redis",
    "redis_url": "redis",
    "shared_url": "redis",
    "shared_backend": "redis",
    "own_redis": "redis",
    "cluster": "redis_cluster",
    "cluster_backend": "redis_cluster",
    "zookeeper_server": "zookeeper",
    "zookeeper_cluster": "zookeeper",
    "zookeeper_ensemble": "zookeeper",
    "pgbouncer": "postgresql",
    "through_pgbouncer": "postgresql",
    "register_db": "postgresql",
}
#: The database aliases of tests/settings.py on a server; each is its server's marker too.
DATABASE_SERVERS = frozenset({"postgresql", "mysql"})
#: Markers of what the fast tier does not have (``slow``: more than a few seconds).
INTEGRATION_MARKERS = frozenset({"postgresql", "mysql", "redis", "redis_cluster", "zookeeper", "slow"})
#: Fixtures that bring in what the fast tier does not have.
INTEGRATION_FIXTURES = frozenset({"sweep"})  # the 2,000-seed sweep, in a process of its own
#: What may differ between Django versions: the Django layer, the deploy tests, the task
#: framework, the user's suite and the example project, the ORM's fenced writes, migrations.
DJANGO_VERSION_PATHS = (
    "django",
    "deploy",
    "usersuite",
    "example",
    "fencing",
    "backends/database/test_migrations.py",
)
TIERS = ("fast", "integration")


def _under(path: Path, prefixes: tuple[str, ...]) -> bool:
    try:
        relative = path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return False
    return any(relative == prefix or relative.startswith(prefix + "/") for prefix in prefixes)


def servers_of(item: pytest.Item) -> set[str]:
    """The servers a test's fixtures and its database mark ask for (their markers' names)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    servers = {SERVER_FIXTURES[name] for name in fixtures & SERVER_FIXTURES.keys()}
    marker = item.get_closest_marker("django_db")
    databases = marker.kwargs.get("databases") if marker is not None else None
    if databases:
        # "__all__": every alias of the settings, the servers' among them where their drivers import
        servers |= DATABASE_SERVERS if databases == "__all__" else DATABASE_SERVERS & set(databases)
    return servers


def tier_of(item: pytest.Item) -> str:
    if item.get_closest_marker("integration") is not None:  # written on it: nothing else says so
        return "integration"
    if _under(item.path, INTEGRATION_PATHS):
        return "integration"
    if any(marker.name in INTEGRATION_MARKERS for marker in item.iter_markers()):
        return "integration"
    if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "integration"
    return "fast"


def mark(items: list[pytest.Item]) -> None:
    """Give every item its servers' and its tier's markers, and ``django_version`` where it applies."""
    for item in items:
        for server in sorted(servers_of(item)):
            if item.get_closest_marker(server) is None:
                item.add_marker(server)
        if item.get_closest_marker("fast") is not None:
            raise pytest.UsageError(
                f"{item.nodeid}: the fast tier is what needs nothing more (tests/tiers.py): "
                "do not write its marker on a test"
            )
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(tier)
        if _under(item.path, DJANGO_VERSION_PATHS):
            item.add_marker("django_version")


def not_collected(path: Path, config: pytest.Config) -> bool:
    """True for a path of integration tests that the run's ``-m`` expression deselects anyway.

    Such modules are then not even imported: a fast run works without the packages of the
    test-integration extra, and collects in a fraction of the time.
    """
    expression = config.option.markexpr
    return bool(expression) and _under(path, INTEGRATION_PATHS) and not _may_select_integration(expression)


def _marked(present: dict[str, bool], name: str, /, **kwargs: object) -> bool:
    return present.get(name, False)


@functools.cache
def _may_select_integration(expression: str) -> bool:
    """Whether some test marked ``integration`` (never ``fast``) can match ``expression``.

    Every combination of the other names in the expression is tried (there are a few).
    """
    try:
        from _pytest.mark.expression import Expression  # pytest's own parser of -m (stable since 6)

        compiled = Expression.compile(expression)
    except Exception:
        return True  # pytest reports the bad expression itself; collect as usual
    names = sorted(set(re.findall(r"[A-Za-z_]\w*", expression)) - {"and", "or", "not", *TIERS})
    if len(names) > 10:
        return True
    for values in itertools.product((False, True), repeat=len(names)):
        present = {**dict(zip(names, values)), "fast": False, "integration": True}
        if compiled.evaluate(functools.partial(_marked, present)):
            return True
    return False
