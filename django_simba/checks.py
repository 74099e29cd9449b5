"""System checks for ``settings.SIMBA`` (ids ``django_simba.E0xx``, never reused).

The configuration checks touch nothing outside the process. The reachability
check talks to the backend, so it runs only with ``--deploy`` or ``--tag simba``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from . import conf
from .spi import ConfigurationError, SimbaError

TAG = "simba"


@register(TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    parsed, problems = conf.parse(conf._raw())
    messages: list[CheckMessage] = [Error(p.message, hint=p.hint, id=p.id) for p in problems]
    if parsed is None:
        return messages
    messages.extend(_check_options(parsed))
    try:
        conf.load_backend_class(parsed.backend)
    except ConfigurationError as error:
        messages.append(
            Error(
                str(error),
                hint="Install the backend's extra, e.g. pip install 'django-simba[redis]'.",
                id="django_simba.E003",
            )
        )
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


def _check_options(parsed: conf.SimbaSettings) -> list[CheckMessage]:
    alias = parsed.backend_alias
    options = parsed.options
    if alias == "database":
        db = options.get("alias", "default")
        if db not in settings.DATABASES:
            return [
                Error(
                    f"SIMBA['OPTIONS']['alias'] names the database {db!r}, which is not in DATABASES.",
                    hint=f"Use one of {', '.join(settings.DATABASES)}.",
                    id="django_simba.E012",
                )
            ]
        from .backends.database.options import parse_options, vendor_of

        try:
            parse_options(options, vendor=vendor_of(settings.DATABASES[db]))
        except ConfigurationError as error:
            return [
                Error(
                    f"SIMBA['OPTIONS'] of the database backend: {error}.",
                    hint="See the database backend's options in the README.",
                    id="django_simba.E012",
                )
            ]
    if alias == "redis":
        cache = options.get("cache")
        if cache is None and not options.get("url"):
            return [
                Error(
                    "The redis backend needs SIMBA['OPTIONS']['cache'] (a django-redis alias) or 'url'.",
                    hint="e.g. 'OPTIONS': {'cache': 'default'}",
                    id="django_simba.E013",
                )
            ]
        if cache is not None and cache not in settings.CACHES:
            return [
                Error(
                    f"SIMBA['OPTIONS']['cache'] names the cache {cache!r}, which is not in CACHES.",
                    hint=f"Use one of {', '.join(settings.CACHES)}.",
                    id="django_simba.E013",
                )
            ]
    if alias == "zookeeper" and not options.get("hosts"):
        return [
            Error(
                "The zookeeper backend needs SIMBA['OPTIONS']['hosts'].",
                hint="e.g. 'OPTIONS': {'hosts': 'zk1:2181,zk2:2181,zk3:2181'}",
                id="django_simba.E014",
            )
        ]
    return []


@register(TAG, deploy=True)
def check_backend_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Deploy check: the backend answers (opens and closes a session)."""
    if not kwargs.get("include_deployment_checks") and "tags" not in kwargs:
        return []
    parsed, problems = conf.parse(conf._raw())
    if parsed is None or problems:
        return []
    from .registry import build_backend

    try:
        backend = build_backend(parsed)
        try:
            opened = backend.open_session(parsed.lease_duration, "django_simba check")
            backend.close_session(opened.session_id)
        finally:
            backend.close()
    except SimbaError as error:
        return [
            Error(
                f"The Simba {parsed.backend_alias} backend cannot be reached: {error}",
                hint="Check SIMBA['OPTIONS'] and that the server is up.",
                id="django_simba.E020",
            )
        ]
    return []
