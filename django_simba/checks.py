"""System checks for ``settings.SIMBA`` (ids ``django_simba.E0xx``, never reused).

The configuration checks report the problems :func:`django_simba.conf.parse_all`
finds, the very ones :func:`~django_simba.conf.get_settings` refuses at run
time, and touch nothing outside the process. The reachability check talks to
the backend, so it is a deployment check, run by ``check --deploy``
(``check --deploy --tag simba`` runs Simba's checks only).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from . import conf
from .operations.lognoise import quiet_client_logs
from .spi import SimbaError, redact

TAG = "simba"
#: The reachability check gives up after this long whatever ``TIMEOUT`` says: ``check`` must not hang.
REACH_TIMEOUT = 5.0


@register(TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return settings_messages()


def settings_messages() -> list[CheckMessage]:
    """Every problem of ``settings.SIMBA``, as check messages (also logged at start-up)."""
    parsed, problems = conf.parse_all(conf.raw_settings())
    messages: list[CheckMessage] = [Error(p.message, hint=p.hint, id=p.id) for p in problems]
    if parsed is not None and parsed.timeout > parsed.renew_interval:
        messages.append(
            Warning(
                f"SIMBA['TIMEOUT'] ({parsed.timeout}) is longer than "
                f"RENEW_INTERVAL ({parsed.renew_interval}).",
                hint="A keep-alive that waits longer than the renew interval counts as failed anyway.",
                id="django_simba.W001",
            )
        )
    return messages


def log_settings_problems(logger: logging.Logger) -> bool:
    """Log every settings problem with its id, for processes that run no checks; True if any is an error.

    Serving processes (gunicorn, Celery...) never run ``check``: without this a
    typo in ``SIMBA`` would show first as a ConfigurationError at a request.
    """
    try:
        messages = settings_messages()
    except Exception:  # at start-up: report, never stop the process from serving
        logger.exception("django-simba: checking settings.SIMBA failed")
        return True
    for message in messages:
        level = logging.ERROR if message.is_serious() else logging.WARNING
        logger.log(level, "django-simba: %s: %s HINT: %s", message.id, message.msg, message.hint)
    serious = any(message.is_serious() for message in messages)
    if serious:
        logger.error(
            "django-simba: not started: locks, elections and groups raise ConfigurationError until "
            "settings.SIMBA is fixed (manage.py check lists the same problems); the rest is served"
        )
    return serious


@register(TAG, deploy=True)
def check_backend_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Deployment check: the backend answers (a session is opened and closed)."""
    parsed, _ = conf.parse(conf.raw_settings())
    if parsed is None or any(message.is_serious() for message in settings_messages()):
        return []  # the configuration check reports it
    try:
        missing = _missing_tables(parsed)
        if missing:
            alias = parsed.backend_class.tables_alias(parsed.options)
            return [
                Error(
                    f"django-simba's tables are missing in the database {alias!r}: {', '.join(missing)}.",
                    hint="Run manage.py migrate (the database backend keeps sessions and leases there).",
                    id="django_simba.E021",
                )
            ]
        with quiet_client_logs():
            _open_and_close_a_session(parsed, min(parsed.timeout, REACH_TIMEOUT))
    except Exception as error:  # a check reports, it never raises
        reason = redact(error if isinstance(error, SimbaError) else f"{type(error).__name__}: {error}")
        if hasattr(error, "check_id"):  # a backend's own finding (ZooKeeper ACLs: E025)
            return [
                Error(
                    f"The Simba {parsed.backend_alias} backend refuses to start: {reason}",
                    hint=getattr(error, "check_hint", None),
                    id=error.check_id,
                )
            ]
        return [
            Error(
                f"The Simba {parsed.backend_alias} backend cannot be reached: {reason}",
                hint="Check SIMBA['OPTIONS'] and that the server is up and accepts this host.",
                id="django_simba.E020",
            )
        ]
    return []


def _missing_tables(parsed: conf.SimbaSettings) -> list[str]:
    """The tables of a backend that ``uses_tables`` not found in its database (a connection error raises)."""
    backend_class = parsed.backend_class
    if not backend_class.uses_tables:
        return []
    from django.db import connections

    from .models import Lease, Member, ReclaimFloor, Session

    found = set(connections[backend_class.tables_alias(parsed.options)].introspection.table_names())
    tables = [model._meta.db_table for model in (Session, Lease, Member, ReclaimFloor)]
    return [table for table in tables if table not in found]


def _open_and_close_a_session(parsed: conf.SimbaSettings, timeout: float) -> None:
    backend = conf.load_backend_class(parsed.backend).build(parsed.options, timeout=timeout)
    try:
        opened = backend.open_session(parsed.lease_duration, "django_simba check")
        backend.close_session(opened.session_id)
    finally:
        backend.close()
