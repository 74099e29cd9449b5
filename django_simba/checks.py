"""System checks for ``settings.SIMBA`` (ids ``django_simba.E0xx``, never reused).

The configuration checks touch nothing outside the process: the backend's
``OPTIONS`` are judged by the backend class itself, whose constructor validates
them without I/O, so ``check`` and the running site apply one rule. The
reachability check talks to the backend, so it is a deployment check, run by
``check --deploy`` (``check --deploy --tag simba`` runs Simba's checks only).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.utils.module_loading import import_string

from . import conf
from .lognoise import quiet_client_logs
from .spi import ConfigurationError, LeaseBackend, SimbaError

TAG = "simba"
#: The reachability check gives up after this long whatever ``TIMEOUT`` says: ``check`` must not hang.
REACH_TIMEOUT = 5.0
#: Invalid ``OPTIONS``, by backend; a backend of your own gets E015.
OPTIONS_ERROR_IDS = {
    "database": "django_simba.E012",
    "redis": "django_simba.E013",
    "zookeeper": "django_simba.E014",
}
OPTIONS_HINTS = {
    "redis": "Give 'cache' (a django-redis cache alias), 'url' (redis://...) or, on a cluster, "
    "'startup_nodes' with 'cluster': True.",
    "zookeeper": "e.g. 'OPTIONS': {'hosts': 'zk1:2181,zk2:2181,zk3:2181'}",
}


@register(TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return settings_messages()


def settings_messages() -> list[CheckMessage]:
    """Every problem of ``settings.SIMBA``, as check messages (also logged at start-up)."""
    parsed, problems = conf.parse(conf._raw())
    messages: list[CheckMessage] = [Error(p.message, hint=p.hint, id=p.id) for p in problems]
    if parsed is None:
        return messages
    messages.extend(_check_backend(parsed))
    if parsed.timeout > parsed.renew_interval:
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


def _check_backend(parsed: conf.SimbaSettings) -> list[CheckMessage]:
    try:
        backend_class = conf.load_backend_class(parsed.backend)
    except ConfigurationError as error:
        return [
            Error(
                str(error),
                hint="Install the backend's extra, e.g. pip install 'django-simba[redis]'.",
                id="django_simba.E003",
            )
        ]
    alias = parsed.backend_alias
    try:
        backend = backend_class(parsed.options, timeout=parsed.timeout)  # as the engine builds it
    except ConfigurationError as error:
        if alias == "database":
            hint = f"'alias' must be one of DATABASES: {', '.join(settings.DATABASES)}."
        else:
            hint = OPTIONS_HINTS.get(alias, "See the documentation of the backend class.")
        return [
            Error(
                f"SIMBA['OPTIONS'] do not suit the {alias} backend: {error}.",
                hint=hint,
                id=OPTIONS_ERROR_IDS.get(alias, "django_simba.E015"),
            )
        ]
    try:
        return _check_borrowed_cache(backend)
    finally:
        backend.close()


def _check_borrowed_cache(backend: LeaseBackend) -> list[CheckMessage]:
    """The Redis backend borrows a django-redis cache's server unless given a url: it must be one."""
    cache = getattr(getattr(backend, "settings", None), "cache", None)
    if not isinstance(cache, str):
        return []
    if cache not in settings.CACHES:
        problem = "which is not in CACHES"
    elif not _is_django_redis(settings.CACHES[cache].get("BACKEND")):
        problem = "which is not a django-redis cache"
    else:
        return []
    return [
        Error(
            f"The redis backend takes its server from the cache {cache!r}, {problem}.",
            hint="Set SIMBA['OPTIONS']['cache'] to a django-redis cache alias, or give 'url'.",
            id="django_simba.E013",
        )
    ]


def _is_django_redis(path: object) -> bool:
    try:
        from django_redis.cache import RedisCache

        cache_class = import_string(str(path))
    except ImportError:
        return False
    return isinstance(cache_class, type) and issubclass(cache_class, RedisCache)


@register(TAG, deploy=True)
def check_backend_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Deployment check: the backend answers (a session is opened and closed)."""
    parsed, _ = conf.parse(conf._raw())
    if parsed is None or any(message.is_serious() for message in settings_messages()):
        return []  # the configuration check reports it
    try:
        with quiet_client_logs():
            _open_and_close_a_session(parsed, min(parsed.timeout, REACH_TIMEOUT))
    except Exception as error:  # a check reports, it never raises
        reason = str(error) if isinstance(error, SimbaError) else f"{type(error).__name__}: {error}"
        return [
            Error(
                f"The Simba {parsed.backend_alias} backend cannot be reached: {reason}",
                hint="Check SIMBA['OPTIONS'] and that the server is up and accepts this host.",
                id="django_simba.E020",
            )
        ]
    return []


def _open_and_close_a_session(parsed: conf.SimbaSettings, timeout: float) -> None:
    backend = conf.load_backend_class(parsed.backend)(parsed.options, timeout=timeout)
    try:
        opened = backend.open_session(parsed.lease_duration, "django_simba check")
        backend.close_session(opened.session_id)
    finally:
        backend.close()
