"""The database backend's ``OPTIONS``, validated without any I/O.

``{"alias": "default", "max_connections": 2, "max_idle_connections": 1,
"transaction_pooling": False, "listen": None}``; every key is optional. Unknown
keys are refused, so a typo does not silently change nothing. The system checks
report what :func:`parse_options` raises (``django_simba.E012``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.db.utils import load_backend

from ...spi import ConfigurationError

KNOWN_OPTIONS = frozenset(
    {"alias", "max_connections", "max_idle_connections", "transaction_pooling", "listen"}
)
#: At most this many connections of a process are open for calls at once (the listener apart).
DEFAULT_MAX_CONNECTIONS = 2
#: Connections kept open between calls; the others close when their call ends.
DEFAULT_MAX_IDLE = 1
#: Keys of a ``DATABASES`` entry that ``listen`` may set for the listening connection.
LISTEN_KEYS = frozenset({"HOST", "PORT", "NAME", "USER", "PASSWORD", "OPTIONS"})


@dataclass(frozen=True)
class DatabaseOptions:
    alias: str = DEFAULT_DB_ALIAS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_idle_connections: int = DEFAULT_MAX_IDLE
    #: The alias goes through a pooler in transaction mode (PgBouncer): no prepared statements,
    #: no session settings, and LISTEN only over ``listen``.
    transaction_pooling: bool = False
    #: Settings merged over the alias's for the PostgreSQL LISTEN connection (a direct one).
    listen: Mapping[str, Any] | None = None


def parse_options(options: Mapping[str, Any] | None, *, vendor: str | None = None) -> DatabaseOptions:
    """The options, or ConfigurationError naming the first bad one (``vendor``: the alias's, if known)."""
    options = options or {}
    unknown = sorted(set(options) - KNOWN_OPTIONS)
    if unknown:
        raise ConfigurationError(f"unknown database backend options {unknown}; use {sorted(KNOWN_OPTIONS)}")
    alias = options.get("alias", DEFAULT_DB_ALIAS)
    if not isinstance(alias, str) or not alias:
        raise ConfigurationError(f"the database backend's alias must be a non-empty str, not {alias!r}")
    max_connections = _count(options, "max_connections", DEFAULT_MAX_CONNECTIONS, least=1)
    max_idle = _count(options, "max_idle_connections", DEFAULT_MAX_IDLE, least=0)
    if max_idle > max_connections:
        raise ConfigurationError(
            f"max_idle_connections ({max_idle}) cannot exceed max_connections ({max_connections})",
            hint=COUNT_HINTS["max_idle_connections"],
        )
    pooling = options.get("transaction_pooling", False)
    if not isinstance(pooling, bool):
        raise ConfigurationError(f"transaction_pooling must be True or False, not {pooling!r}")
    listen = options.get("listen")
    if listen is not None:
        if not isinstance(listen, Mapping) or not listen:
            raise ConfigurationError(
                "listen must be a non-empty dict of DATABASES settings for the LISTEN connection, "
                f"e.g. {{'HOST': 'db1', 'PORT': 5432}}, not {listen!r}"
            )
        bad = sorted(set(listen) - LISTEN_KEYS)
        if bad:
            raise ConfigurationError(f"listen takes the DATABASES keys {sorted(LISTEN_KEYS)}, not {bad}")
    if vendor is not None and vendor != "postgresql":
        given = [key for key in ("transaction_pooling", "listen") if options.get(key) not in (None, False)]
        if given:
            raise ConfigurationError(f"{' and '.join(given)} are for PostgreSQL, not {vendor}")
    return DatabaseOptions(alias, max_connections, max_idle, pooling, dict(listen) if listen else None)


#: How to fix each count (the backend's own hint speaks of 'alias', which these are not about).
COUNT_HINTS = {
    "max_connections": (
        f"max_connections is how many database connections the backend may open at once, at least 1 "
        f"(default {DEFAULT_MAX_CONNECTIONS}: the keep-alive's and the contenders')."
    ),
    "max_idle_connections": (
        f"max_idle_connections is how many open connections it keeps while idle, from 0 to "
        f"max_connections (default {DEFAULT_MAX_IDLE})."
    ),
}


def _count(options: Mapping[str, Any], key: str, default: int, *, least: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigurationError(f"{key} must be an int >= {least}, not {value!r}", hint=COUNT_HINTS[key])
    return value


def alias_vendor(alias: str) -> str:
    """The vendor of a database alias ("postgresql", "mysql", "sqlite"...); ConfigurationError if none."""
    from django.db import connections

    if alias not in connections.settings:
        raise ConfigurationError(f"the database backend's alias {alias!r} is not in settings.DATABASES")
    return str(load_backend(connections.settings[alias]["ENGINE"]).DatabaseWrapper.vendor)


def vendor_of(database: Mapping[str, Any]) -> str | None:
    """The vendor of a ``DATABASES`` entry ("postgresql", "mysql"...), None if its ENGINE won't load."""
    try:
        return str(load_backend(database["ENGINE"]).DatabaseWrapper.vendor)
    except (ImproperlyConfigured, ImportError, KeyError):  # Django's own checks report a bad ENGINE
        return None
