"""Each backend class judges its own OPTIONS and declares what it keeps, whatever name SIMBA gives it.

The check id, the hint and the tables' alias come from the backend class, so a built-in
backend named by its module path, a subclass of one, or a backend of one's own are treated
alike: no part of the Django layer compares the backend's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.test import override_settings

from django_simba.backends.memory import MemoryBackend
from django_simba.checks import check_settings
from django_simba.models import Lease
from django_simba.routers import SimbaRouter, simba_alias
from django_simba.spi import DEFAULT_TIMEOUT, LeaseBackend, NotSupported, OptionsProblem

FAST = {"LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "TIMEOUT": 1}
BACKENDS = "django_simba.backends"


class SizedBackend(MemoryBackend):
    """A backend of one's own with a check id and a verdict of its own."""

    options_check_id = "django_simba.E015"

    @classmethod
    def options_problems(
        cls, options: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT
    ) -> list[OptionsProblem]:
        size = options.get("size", 1)
        if isinstance(size, int) and size > 0:
            return []
        return [OptionsProblem(f"size must be a positive int, not {size!r}", "Give 'size': 1 or more.")]


def messages(simba: dict[str, Any]) -> list[tuple[str, str, str]]:
    with override_settings(SIMBA={**simba, **FAST}):
        return [(m.id, m.msg, m.hint) for m in check_settings()]


@pytest.mark.parametrize(
    ("backend", "options", "expected"),
    [
        (f"{BACKENDS}.database.vendors.AnyDatabaseBackend", {"alias": "nope"}, "django_simba.E012"),
        (f"{BACKENDS}.database.sqlite.SqliteBackend", {"max_connections": 0}, "django_simba.E012"),
        (f"{BACKENDS}.redis.backend.RedisBackend", {"url": 5}, "django_simba.E013"),
        (f"{BACKENDS}.redis.backend.RedisBackend", {"cache": "nope"}, "django_simba.E013"),
        (
            f"{BACKENDS}.zookeeper.backend.ZookeeperBackend",
            {"host": "zk:2181"},
            "django_simba.E014",
        ),
    ],
)
def test_a_built_in_backend_named_by_its_module_path_reports_under_its_own_id(backend, options, expected):
    found = messages({"BACKEND": backend, "OPTIONS": options})
    assert [problem_id for problem_id, _, _ in found] == [expected]
    _, message, hint = found[0]
    assert message.startswith(f"SIMBA['OPTIONS'] do not suit the {backend} backend: ")
    assert hint != LeaseBackend.options_hint(), "the backend's own hint, not the generic one"


def test_the_same_backend_by_its_alias_and_by_its_path_reports_the_same_problem():
    by_alias = messages({"BACKEND": "database", "OPTIONS": {"alias": "nope"}})
    by_path = messages({"BACKEND": f"{BACKENDS}.database.AnyDatabaseBackend", "OPTIONS": {"alias": "nope"}})
    assert by_alias == by_path  # the package's path is known as the alias "database"
    assert by_alias[0][2].startswith("'alias' must be one of DATABASES: default")


def test_a_backend_of_ones_own_gives_its_problems_and_hints():
    path = f"{__name__}.SizedBackend"
    assert messages({"BACKEND": path, "OPTIONS": {"size": 4}}) == []
    [(problem_id, message, hint)] = messages({"BACKEND": path, "OPTIONS": {"size": 0}})
    assert problem_id == "django_simba.E015"
    assert message == f"SIMBA['OPTIONS'] do not suit the {path} backend: size must be a positive int, not 0."
    assert hint == "Give 'size': 1 or more."


def test_the_default_verdict_is_the_constructors():
    assert LeaseBackend.options_problems.__func__ is MemoryBackend.options_problems.__func__  # type: ignore[attr-defined]
    assert MemoryBackend.options_problems({}) == []
    assert MemoryBackend.options_problems({}, timeout=0) == [
        OptionsProblem("timeout must be > 0 seconds, not 0", "See the documentation of the backend class.")
    ]


@pytest.mark.parametrize(
    ("backend", "keeps_rows"),
    [
        ("database", True),
        (f"{BACKENDS}.database.sqlite.SqliteBackend", True),
        ("memory", False),
        ("redis", False),
        ("zookeeper", False),
    ],
)
def test_only_backends_that_keep_rows_in_the_tables_say_so(backend, keeps_rows):
    from django_simba import conf

    parsed, _ = conf.parse({"BACKEND": backend})
    assert parsed is not None
    backend_class = parsed.backend_class
    assert backend_class.uses_tables is keeps_rows
    if not keeps_rows:
        with pytest.raises(NotSupported):
            backend_class.tables_alias({})


def test_the_router_follows_the_backend_class_not_its_name():
    simba = {
        "BACKEND": f"{BACKENDS}.database.sqlite.SqliteBackend",
        "OPTIONS": {"alias": "sqlite"},
    }
    with override_settings(SIMBA=simba):
        assert simba_alias() == "sqlite"
        assert SimbaRouter().db_for_write(Lease) == "sqlite"
    with override_settings(SIMBA={"BACKEND": f"{__name__}.SizedBackend"}):
        assert simba_alias() is None
