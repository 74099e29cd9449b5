"""No credential in a log record of django-simba's (issue 28.3): its message, its arguments, its traceback.

Messages are masked where they are made; these tests are about what a handler formats later: a
traceback whose chained driver error, or a callback's, quotes a URL with its password.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import pkgutil
import subprocess
import sys

import pytest

import django_simba
from django_simba.redacted_logs import REDACT_SECRETS
from tests.django.processes import ROOT, child_environ, redis_url_or_skip

SECRET = "s3cret-Passw0rd"
URL = f"redis://reports:{SECRET}@127.0.0.1:6379/15"


def formatted(logger_name: str, log: object) -> str:
    """What a plain ``StreamHandler`` prints of the records ``log(logger)`` makes."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # setLevel, not .level: it clears the loggers' cached answers
    try:
        log(logger)  # type: ignore[operator]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return stream.getvalue()


def fail_with_the_url() -> None:
    try:
        raise ConnectionError(f"Error connecting to {URL}")
    except ConnectionError as error:
        raise RuntimeError("the reports store refused us") from error


def test_every_logger_of_the_package_masks_its_records():
    """A module that logs to a logger of its own must add it to ``redacted_logs.LOGGERS``."""
    for module in pkgutil.walk_packages(django_simba.__path__, "django_simba."):
        if module.name.endswith(".__main__"):  # a program: importing it runs it
            continue
        with contextlib.suppress(ModuleNotFoundError):  # an extra this tier has not installed
            importlib.import_module(module.name)
    with contextlib.suppress(ModuleNotFoundError):
        importlib.import_module("django_simba.integrations.health_check")
    names = [
        name
        for name, logger in logging.Logger.manager.loggerDict.items()
        if (name == "django_simba" or name.startswith("django_simba.")) and isinstance(logger, logging.Logger)
    ]
    assert "django_simba.engine" in names and "django_simba.backends.database.listener" in names
    loggers = [logging.getLogger(name) for name in [*names, "health_check"]]
    assert [logger.name for logger in loggers if REDACT_SECRETS not in logger.filters] == []


LOGGERS = ["django_simba.engine", "django_simba.backends.redis", "health_check"]


@pytest.mark.parametrize("logger_name", LOGGERS)
def test_a_traceback_and_the_arguments_of_a_record_are_masked(logger_name):
    if logger_name == "health_check":
        pytest.importorskip("django_simba.integrations.health_check")

    def log(logger: logging.Logger) -> None:
        logger.warning("cannot reach %s (%r)", URL, {"password": SECRET})
        try:
            fail_with_the_url()
        except RuntimeError:
            logger.exception("a callback raised")
        logger.info("the reports store refused us", stack_info=True, extra={"url": URL})

    text = formatted(logger_name, log)
    assert SECRET not in text, text
    assert "cannot reach redis://reports:***@127.0.0.1:6379/15 ({'password': '***'})" in text
    assert "ConnectionError: Error connecting to redis://reports:***@127.0.0.1:6379/15" in text  # chained
    assert "RuntimeError: the reports store refused us" in text and "Stack (most recent call last)" in text


def test_a_record_with_nothing_to_mask_keeps_its_template_and_arguments(caplog):
    with caplog.at_level(logging.INFO, logger="django_simba.engine"):
        logging.getLogger("django_simba.engine").info("session %s opened on the %s backend", "abc", "redis")
        logging.getLogger("django_simba.engine").info("cannot reach %s", URL)
    kept, masked = caplog.records
    assert (kept.msg, kept.args) == ("session %s opened on the %s backend", ("abc", "redis"))
    assert (masked.msg, masked.args) == ("cannot reach redis://reports:***@127.0.0.1:6379/15", ())


def test_arguments_that_do_not_fit_their_message_are_masked_too():
    text = formatted("django_simba.engine", lambda logger: logger.warning("%d reconnects", URL))
    assert SECRET not in text and "redis://reports:***@127.0.0.1:6379/15" in text


def test_a_record_below_the_level_is_never_looked_at(monkeypatch):
    seen: list[logging.LogRecord] = []
    monkeypatch.setattr(type(REDACT_SECRETS), "filter", lambda self, record: seen.append(record) or True)
    logger = logging.getLogger("django_simba.engine")
    monkeypatch.setattr(logger, "level", logging.WARNING)
    logger.debug("cannot reach %s", URL)
    logger.info("cannot reach %s", URL)
    assert seen == []
    logger.warning("cannot reach %s", URL)
    assert len(seen) == 1


@pytest.mark.redis
def test_a_failed_callback_logged_with_its_traceback_in_a_process_with_the_users_logging():
    """The process's ``LOGGING`` is the user's (a console handler on ``django_simba``); a leader's
    callback is refused by a real Redis (a password it does not know) and raises an error naming the
    URL it dialled, chained to the driver's: the engine logs it with its traceback, without the password."""
    shared = redis_url_or_skip()
    simba = {"BACKEND": "redis", "OPTIONS": {"url": shared}, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}
    argv = [sys.executable, "-m", "tests.django.failing_callback", URL]
    environ = child_environ("tests.django.user_logging_settings", simba)
    done = subprocess.run(argv, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "ERROR django_simba.engine: django-simba: a callback raised; the engine goes on" in output
    assert "redis.exceptions.AuthenticationError" in output  # the server's refusal, chained
    assert "RuntimeError: the reports store at redis://reports:***@127.0.0.1:6379/15 refused us" in output
    assert SECRET not in output, output
