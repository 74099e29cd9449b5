"""A database router that keeps django-simba's tables in the database backend's own alias.

With SQLite, which lets one connection write at a time, the tables belong in a file of
their own, so that a write transaction of the application never blocks a lease::

    DATABASES["simba"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "simba.sqlite3"}
    DATABASE_ROUTERS = ["django_simba.routers.SimbaRouter"]
    SIMBA = {"OPTIONS": {"alias": "simba"}}

The router sends the ORM's reads and writes of django-simba's models (the admin, your own
queries) to ``SIMBA["OPTIONS"]["alias"]``, migrates them there and only there, and keeps
every other app's tables out of that alias. It has no opinion when the backend keeps no
records in these tables (``uses_tables``: only the database backend does), or when its
alias is ``default``.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS

APP_LABEL = "django_simba"


def simba_alias() -> str | None:
    """The alias of the database backend's tables, when it is not ``default``; else None."""
    from .conf import get_settings
    from .spi import ConfigurationError

    try:
        settings = get_settings()
        backend_class = settings.backend_class
        if not backend_class.uses_tables:
            return None
        alias = backend_class.tables_alias(settings.options)
    except ConfigurationError:
        return None  # the system checks report it; the ORM must go on working meanwhile
    return alias if alias != DEFAULT_DB_ALIAS else None


class SimbaRouter:
    """Routes django_simba's models to the database backend's alias (see the module's docstring)."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        return simba_alias() if model._meta.app_label == APP_LABEL else None

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        return simba_alias() if model._meta.app_label == APP_LABEL else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return None

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        alias = simba_alias()
        if alias is None:
            return None
        if app_label == APP_LABEL:
            return db == alias
        return False if db == alias else None
