"""Settings parsing and the system checks: every invalid value has an id and a hint.

The deployment check (E020) is run the way operators run it, through
``call_command("check", ...)``, against servers that are not there: a closed
Redis or ZooKeeper port, a PostgreSQL or MariaDB database that does not exist.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_simba import conf, lock
from django_simba.backends.memory import MemoryBackend
from django_simba.checks import check_settings
from django_simba.spi import ConfigurationError, SimbaError
from tests.django.engines import reset_engine

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")
#: Nothing listens on port 1 of the loopback interface: a connection is refused at once.
CLOSED_PORT = 1
FAST = {"LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "TIMEOUT": 1}
#: ``call_command("check")``: from Django 6.1 on, the model checks read the MySQL server's version.
CHECK_COMMAND = pytest.mark.django_db(databases="__all__")


class PickyBackend(MemoryBackend):
    """A backend of one's own that validates its options in its constructor, as the built-in ones do."""

    def __init__(self, options=None, *, timeout=5.0):
        if options and set(options) - {"size"}:
            raise ConfigurationError(f"unknown options {sorted(set(options) - {'size'})}")
        super().__init__(timeout=timeout)


def ids(simba) -> list[str]:
    with override_settings(SIMBA=simba):
        return [m.id for m in check_settings()]


def test_defaults_are_valid():
    from django.conf import settings

    with override_settings():
        del settings.SIMBA  # sends no setting_changed: the cache is cleared by hand, before and after
        conf.clear_cache()
        try:
            parsed = conf.get_settings()
        finally:
            conf.clear_cache()
        assert parsed.backend == "django_simba.backends.database.AnyDatabaseBackend"
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
        ({"BACKEND": "."}, "django_simba.E003"),  # import_string raised ValueError (found by hypothesis)
        ({"BACKEND": ".relative.Backend"}, "django_simba.E003"),  # ... and TypeError
        ({"BACKEND": "django_simba.conf.SimbaSettings"}, "django_simba.E003"),
        ({"LEASE_DURATION": 0}, "django_simba.E004"),
        ({"LEASE_DURATION": "15"}, "django_simba.E004"),
        ({"RENEW_INTERVAL": -1}, "django_simba.E005"),
        ({"LEASE_DURATION": 10, "RENEW_INTERVAL": 6}, "django_simba.E005"),
        ({"DRIFT": 0.7}, "django_simba.E006"),
        ({"DRIFT": True}, "django_simba.E006"),
        ({"PURGE_INTERVAL": None}, "django_simba.E007"),
        ({"AUTOSTART": "yes"}, "django_simba.E008"),
        ({"PREFORK_PARENT": "gunicorn"}, "django_simba.E016"),
        ({"METADATA": "x" * 1025}, "django_simba.E009"),
        ({"METADATA": "bell\x07"}, "django_simba.E009"),
        ({"OPTIONS": ["default"]}, "django_simba.E010"),
        ({"SERVING_COMMANDS": [""]}, "django_simba.E017"),
        ({"SERVING_COMMANDS": 3}, "django_simba.E017"),
        ({"TIMEOUT": 0}, "django_simba.E011"),
        ({"BACKEND": "memory", "TIMEOUT": 6}, "django_simba.W001"),
        ({"BACKEND": "database", "OPTIONS": {"alias": "nope"}}, "django_simba.E012"),
        ({"BACKEND": "redis", "OPTIONS": {}}, "django_simba.E013"),
        ({"BACKEND": "redis", "OPTIONS": {"cache": "nope"}}, "django_simba.E013"),
        ({"BACKEND": "redis", "OPTIONS": {"url": "redis://x", "cache": "redis"}}, "django_simba.E013"),
        ({"BACKEND": "zookeeper", "OPTIONS": {"hosts": ""}}, "django_simba.E014"),
        ({"BACKEND": "zookeeper", "OPTIONS": {"host": "zk:2181"}}, "django_simba.E014"),
        ({"BACKEND": "tests.django.test_checks.PickyBackend", "OPTIONS": {"colour": 1}}, "django_simba.E015"),
    ],
)
def test_invalid_settings_are_reported_with_ids_and_hints(simba, expected):
    with override_settings(SIMBA=simba):
        messages = check_settings()
    assert expected in [m.id for m in messages]
    assert all(m.hint for m in messages)


@pytest.mark.parametrize(
    ("simba", "expected"),
    [
        ({"LEASE_DURATION": 400 * 86400, "RENEW_INTERVAL": 5}, "django_simba.E004"),
        ({"LEASE_DURATION": float("inf"), "RENEW_INTERVAL": float("inf")}, "django_simba.E004"),
        ({"LEASE_DURATION": float("nan")}, "django_simba.E004"),
        ({"RENEW_INTERVAL": float("nan")}, "django_simba.E005"),
        ({"RENEW_INTERVAL": float("inf")}, "django_simba.E005"),
        ({"PURGE_INTERVAL": float("inf")}, "django_simba.E007"),
        ({"TIMEOUT": float("inf")}, "django_simba.E011"),
        ({"TIMEOUT": float("nan")}, "django_simba.E011"),
        ({"TIMEOUT": 400 * 86400}, "django_simba.E011"),
        ({"DRIFT": float("nan")}, "django_simba.E006"),
    ],
)
def test_numbers_out_of_range_are_refused_with_the_accepted_range(simba, expected):
    """Issue 22.8: 400 days, inf and nan passed the checks, then failed (or hung) at run time."""
    with override_settings(SIMBA={"BACKEND": "memory", **simba}):
        messages = [m for m in check_settings() if m.id == expected]
        with pytest.raises(ConfigurationError, match=expected):
            conf.get_settings()
    assert messages, check_settings
    if expected != "django_simba.E006":
        assert "up to 31536000 (365 days)" in messages[0].msg, messages[0].msg


def test_valid_settings_report_nothing():
    assert ids({"BACKEND": "memory", "LEASE_DURATION": 10, "RENEW_INTERVAL": 5, "METADATA": "web-1 ✓"}) == []


@CHECK_COMMAND
def test_manage_py_check_fails_on_a_bad_setting():
    with override_settings(SIMBA={"LEASE_DURATION": -5}), pytest.raises(SystemCheckError, match="E004"):
        call_command("check")


def test_get_settings_raises_a_clear_error_and_follows_override_settings():
    with override_settings(SIMBA={"DRIFT": 2}), pytest.raises(ConfigurationError, match="E006"):
        conf.get_settings()
    with override_settings(SIMBA={"BACKEND": "memory", "LEASE_DURATION": 40, "RENEW_INTERVAL": 10}):
        assert conf.get_settings().lease_duration == 40
    assert conf.get_settings().lease_duration == 3


# -- one rule for OPTIONS, in check and at run time ------------------------------------------------

DJANGO_REDIS_DEFAULT = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}


def test_redis_without_options_borrows_the_default_cache_in_check_and_at_run_time(redis_server):
    simba = {"BACKEND": "redis", **FAST}
    with override_settings(SIMBA=simba, CACHES=DJANGO_REDIS_DEFAULT):
        try:
            assert ids(simba) == []
            with lock("checks:default-cache", timeout=5) as term:
                assert term.token > 0
        finally:
            reset_engine()


def test_redis_without_options_and_no_django_redis_default_cache_fails_in_check_and_at_run_time():
    simba = {"BACKEND": "redis", **FAST}
    with override_settings(SIMBA=simba):  # the test settings' "default" cache is a LocMemCache
        messages = check_settings()
        assert [m.id for m in messages] == ["django_simba.E013"]
        assert "'default', which is not a django-redis cache" in messages[0].msg
        try:
            with pytest.raises(SimbaError, match="not a django-redis cache"), lock("checks:x", timeout=2):
                pass
        finally:
            reset_engine()


def test_zookeeper_without_hosts_is_valid_as_at_run_time():
    assert ids({"BACKEND": "zookeeper", **FAST}) == []


# -- the deployment check: the backend answers -------------------------------------------------


@pytest.mark.parametrize(
    "simba",
    [
        {"BACKEND": "redis", "OPTIONS": {"url": f"redis://127.0.0.1:{CLOSED_PORT}/0"}, **FAST},
        {"BACKEND": "zookeeper", "OPTIONS": {"hosts": f"127.0.0.1:{CLOSED_PORT}"}, **FAST},
    ],
    ids=["redis", "zookeeper"],
)
@CHECK_COMMAND
def test_deploy_check_reports_an_unreachable_backend(simba, caplog):
    with override_settings(SIMBA=simba):
        for args in (["--deploy"], ["--deploy", "--tag", "simba"]):
            started = time.monotonic()
            with pytest.raises(SystemCheckError, match=r"django_simba\.E020.*cannot be reached"):
                call_command("check", *args)
            assert time.monotonic() - started < 30, "check waits at most its short timeout per server"
        call_command("check", "--tag", "simba")  # without --deploy nothing leaves the process
    client_noise = [r for r in caplog.records if "kazoo" in r.name]  # kazoo's, or its under the backend's
    assert client_noise == []


@CHECK_COMMAND
def test_deploy_check_passes_when_the_backend_answers(redis_server):
    simba = {"BACKEND": "redis", "OPTIONS": {"url": REDIS_URL}, **FAST}
    with override_settings(SIMBA=simba):
        call_command("check", "--deploy", "--tag", "simba")


def deploy_check(settings_module: str, simba: dict, **environ: str) -> subprocess.CompletedProcess[str]:
    """``check --deploy --tag simba`` in a process of its own, with these settings."""
    environ = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PYTHONPATH": str(ROOT),
        "SIMBA_CHILD_SIMBA": json.dumps(simba),
        **environ,
    }
    environ.pop("PYTEST_CURRENT_TEST", None)
    argv = [sys.executable, "-m", "django", "check", "--deploy", "--tag", "simba"]
    return subprocess.run(argv, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("alias", "name_variable"),
    [
        pytest.param("postgresql", "SIMBA_PG_NAME", marks=pytest.mark.postgresql),
        pytest.param("mysql", "SIMBA_MYSQL_NAME", marks=pytest.mark.mysql),
    ],
)
def test_deploy_check_reports_a_missing_database(alias, name_variable):
    simba = {"BACKEND": "database", "OPTIONS": {"alias": alias}, **FAST}
    done = deploy_check("tests.django.process_settings", simba, **{name_variable: "simba_no_such_database"})
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "django_simba.E020" in done.stderr and "simba_no_such_database" in done.stderr


@pytest.mark.parametrize(
    ("options", "about"),
    [
        ({"max_connections": 0}, "max_connections is"),
        ({"max_idle_connections": 5}, "max_idle_connections is"),
    ],
)
def test_the_database_options_hint_speaks_of_the_option_at_fault(options, about):
    with override_settings(SIMBA={"BACKEND": "database", "OPTIONS": options}):
        [message] = [m for m in check_settings() if m.id == "django_simba.E012"]
    assert about in message.hint and "alias" not in message.hint, message.hint


def test_deploy_check_tells_tables_not_migrated_from_a_database_not_reached(tmp_path):
    """Un-migrated tables were reported as "cannot be reached" (E020): they have an id of their own."""
    database = str(tmp_path / "never-migrated.sqlite3")
    simba = {"BACKEND": "database", **FAST}
    done = deploy_check("tests.django.tinysite.settings", simba, SIMBA_CHILD_SQLITE=database)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "django_simba.E021" in done.stderr and "E020" not in done.stderr, done.stderr
    assert "simba_session, simba_lease, simba_member" in done.stderr and "migrate" in done.stderr


@pytest.fixture
def redis_server():
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping()
    except redis.RedisError:
        from tests.conftest import server_missing

        server_missing("Redis")


def test_client_log_records_are_dropped_and_counted_only_while_quieted():
    from django_simba.operations.lognoise import quiet_client_logs

    kazoo = logging.getLogger("kazoo.client")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    kazoo.addHandler(handler)
    try:
        with quiet_client_logs() as chatter:
            kazoo.warning("Connection dropped: refused")
            kazoo.error("a real error")
        kazoo.warning("after")
    finally:
        kazoo.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["a real error", "after"]
    assert chatter.dropped == 1
