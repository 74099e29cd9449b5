"""Settings parsing and the system checks: every invalid value has an id and a hint."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_simba import conf
from django_simba.checks import check_settings
from django_simba.spi import ConfigurationError


def ids(simba) -> list[str]:
    with override_settings(SIMBA=simba):
        return [m.id for m in check_settings()]


def test_defaults_are_valid():
    with override_settings():
        from django.conf import settings

        del settings.SIMBA
        parsed = conf.get_settings()
        assert parsed.backend == "django_simba.backends.database.DatabaseBackend"
        assert (parsed.lease_duration, parsed.renew_interval, parsed.drift) == (15.0, 5.0, 0.01)
        assert parsed.timeout == parsed.renew_interval
        assert parsed.autostart is True


@pytest.mark.parametrize(
    ("simba", "expected"),
    [
        ("redis", "django_simba.E001"),
        ({"BACKNED": "redis"}, "django_simba.E002"),
        ({"BACKEND": "cassandra"}, "django_simba.E003"),
        ({"BACKEND": "no.such.Backend"}, "django_simba.E003"),
        ({"BACKEND": "django_simba.conf.SimbaSettings"}, "django_simba.E003"),
        ({"LEASE_DURATION": 0}, "django_simba.E004"),
        ({"LEASE_DURATION": "15"}, "django_simba.E004"),
        ({"RENEW_INTERVAL": -1}, "django_simba.E005"),
        ({"LEASE_DURATION": 10, "RENEW_INTERVAL": 6}, "django_simba.E005"),
        ({"DRIFT": 0.7}, "django_simba.E006"),
        ({"DRIFT": True}, "django_simba.E006"),
        ({"PURGE_INTERVAL": None}, "django_simba.E007"),
        ({"AUTOSTART": "yes"}, "django_simba.E008"),
        ({"PREFORK_PARENT": "gunicorn"}, "django_simba.E015"),
        ({"METADATA": "x" * 1025}, "django_simba.E009"),
        ({"METADATA": "bell\x07"}, "django_simba.E009"),
        ({"OPTIONS": ["default"]}, "django_simba.E010"),
        ({"TIMEOUT": 0}, "django_simba.E011"),
        ({"BACKEND": "memory", "TIMEOUT": 6}, "django_simba.W001"),
        ({"BACKEND": "database", "OPTIONS": {"alias": "nope"}}, "django_simba.E012"),
        ({"BACKEND": "redis", "OPTIONS": {}}, "django_simba.E013"),
        ({"BACKEND": "redis", "OPTIONS": {"cache": "nope"}}, "django_simba.E013"),
        ({"BACKEND": "zookeeper", "OPTIONS": {}}, "django_simba.E014"),
    ],
)
def test_invalid_settings_are_reported_with_ids_and_hints(simba, expected):
    with override_settings(SIMBA=simba):
        messages = check_settings()
    assert expected in [m.id for m in messages]
    assert all(m.hint for m in messages)


def test_valid_settings_report_nothing():
    assert ids({"BACKEND": "memory", "LEASE_DURATION": 10, "RENEW_INTERVAL": 5, "METADATA": "web-1 ✓"}) == []


def test_manage_py_check_fails_on_a_bad_setting():
    with override_settings(SIMBA={"LEASE_DURATION": -5}), pytest.raises(SystemCheckError, match="E004"):
        call_command("check")


def test_get_settings_raises_a_clear_error_and_follows_override_settings():
    with override_settings(SIMBA={"DRIFT": 2}), pytest.raises(ConfigurationError, match="E006"):
        conf.get_settings()
    with override_settings(SIMBA={"BACKEND": "memory", "LEASE_DURATION": 40, "RENEW_INTERVAL": 10}):
        assert conf.get_settings().lease_duration == 40
    assert conf.get_settings().lease_duration == 3
