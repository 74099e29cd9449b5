"""The database backend's OPTIONS: bad values are clear errors, and ``manage.py check`` reports them."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_simba.backends.database.options import DatabaseOptions, parse_options
from django_simba.checks import check_settings
from django_simba.spi import ConfigurationError


def test_the_defaults_keep_one_idle_connection_of_two_at_most() -> None:
    assert parse_options({}) == DatabaseOptions("default", 2, 1, False, None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_connections": 0}, "max_connections must be an int >= 1"),
        ({"max_connections": "4"}, "max_connections must be an int >= 1"),
        ({"max_connections": True}, "max_connections must be an int >= 1"),
        ({"max_idle_connections": -1}, "max_idle_connections must be an int >= 0"),
        ({"max_connections": 1, "max_idle_connections": 2}, r"cannot exceed max_connections \(1\)"),
        ({"transaction_pooling": "yes"}, "transaction_pooling must be True or False"),
        ({"listen": "db1:5432"}, "listen must be a non-empty dict"),
        ({"listen": {"HOST": "db1", "ENGINE": "x"}}, r"listen takes the DATABASES keys .* not \['ENGINE'\]"),
        ({"pool_size": 3}, r"unknown database backend options \['pool_size'\]"),
    ],
)
def test_bad_options_are_configuration_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_options(options)


def test_pgbouncer_options_are_for_postgresql_only() -> None:
    parse_options({"transaction_pooling": True, "listen": {"HOST": "db1"}}, vendor="postgresql")
    with pytest.raises(ConfigurationError, match="transaction_pooling are for PostgreSQL, not mysql"):
        parse_options({"transaction_pooling": True}, vendor="mysql")


@pytest.mark.parametrize(
    "options",
    [
        {"alias": "sqlite", "max_connections": 0},
        {"alias": "sqlite", "max_idle_connections": 5},
        {"alias": "mysql", "transaction_pooling": True},
    ],
)
def test_the_system_check_reports_bad_options(options: dict[str, Any]) -> None:
    with override_settings(SIMBA={"BACKEND": "database", "OPTIONS": options}):
        messages = check_settings()
    assert [m.id for m in messages] == ["django_simba.E012"]
    assert messages[0].hint


def test_manage_py_check_fails_on_a_bad_pool_size() -> None:
    simba = {"BACKEND": "database", "OPTIONS": {"alias": "sqlite", "max_connections": -1}}
    # only this app's checks: from Django 6 on, the model checks read each MySQL alias's server
    # version, which needs database access (and the django_db mark)
    with override_settings(SIMBA=simba), pytest.raises(SystemCheckError, match=r"E012.*max_connections"):
        call_command("check", "--tag", "simba")


@pytest.mark.postgresql  # the alias (defined where its driver is installed)
def test_good_options_pass_the_check() -> None:
    options = {
        "alias": "postgresql",
        "max_connections": 4,
        "transaction_pooling": True,
        "listen": {"PORT": 5432},
    }
    with override_settings(SIMBA={"BACKEND": "database", "OPTIONS": options}):
        assert check_settings() == []
