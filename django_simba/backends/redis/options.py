"""The backend's ``OPTIONS``, validated without any I/O.

``{"cache": "<django-redis alias>"}`` (default: ``"default"``) or ``{"url": "redis://..."}``
(or, on a cluster, ``{"startup_nodes": ["host:port", ...]}``, or under Redis Sentinel,
``{"sentinels": [("host", port), ...], "service": "<name the Sentinels know the primary by>"}``),
plus ``cluster``, ``wait_replicas``, ``check_eviction``, ``hand_over`` and the connection settings
redis-py takes as they are (password, TLS). With ``sentinels``: ``db`` (the primary's database,
default 0), ``sentinel_options`` (the same connection settings, for the Sentinels themselves) and
``min_other_sentinels`` (trust a Sentinel's answer only when it sees that many others).
Unknown keys are refused so a typo does not silently change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...spi import ConfigurationError

#: Passed to redis-py unchanged (credentials, TLS, client name).
CONNECTION_OPTIONS = frozenset(
    {
        "username",
        "password",
        "ssl",
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_ca_data",
        "ssl_check_hostname",
        "ssl_min_version",
        "ssl_ciphers",
        "client_name",
    }
)
SENTINEL_OPTIONS = frozenset({"sentinels", "service", "db", "sentinel_options", "min_other_sentinels"})
BACKEND_OPTIONS = (
    frozenset({"cache", "url", "startup_nodes", "cluster", "wait_replicas", "check_eviction", "hand_over"})
    | SENTINEL_OPTIONS
)
KNOWN_OPTIONS = CONNECTION_OPTIONS | BACKEND_OPTIONS
#: Without 'cache', 'url' or 'startup_nodes' the backend borrows the django-redis cache "default".
DEFAULT_CACHE = "default"


@dataclass(frozen=True)
class RedisOptions:
    cache: str | None = None
    url: str | None = None
    startup_nodes: tuple[tuple[str, int], ...] = ()
    cluster: bool = False
    wait_replicas: int = 0
    check_eviction: bool = True
    hand_over: bool = True
    connection: Mapping[str, Any] = field(default_factory=dict)
    #: Under Sentinel: where the Sentinels are, and what they call the primary.
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str | None = None
    db: int = 0
    sentinel_connection: Mapping[str, Any] = field(default_factory=dict)
    min_other_sentinels: int = 0

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> RedisOptions:
        unknown = sorted(set(options) - KNOWN_OPTIONS)
        if unknown:
            known = ", ".join(sorted(KNOWN_OPTIONS))
            raise ConfigurationError(f"unknown Redis backend option(s) {', '.join(unknown)}; known: {known}")
        cache = _optional_str(options, "cache")
        url = _optional_str(options, "url")
        nodes = _addresses(options.get("startup_nodes"), "startup_nodes")
        sentinels = _addresses(options.get("sentinels"), "sentinels")
        sources = (("cache", cache), ("url", url), ("startup_nodes", nodes), ("sentinels", sentinels))
        given = [what for what, value in sources if value]
        if len(given) > 1:
            raise ConfigurationError(
                "the Redis backend takes one of OPTIONS 'cache' (a django-redis cache alias), "
                f"'url' (redis://...), 'startup_nodes' (cluster) or 'sentinels', not {' and '.join(given)}"
            )
        if not given:
            cache = DEFAULT_CACHE
        cluster = _flag(options, "cluster", default=bool(nodes))
        if nodes and not cluster:
            raise ConfigurationError("'startup_nodes' is for a Redis Cluster: set 'cluster': True")
        if cluster and cache:
            raise ConfigurationError(
                "django-redis has no Redis Cluster client: on a cluster give 'url' or 'startup_nodes'"
            )
        if cluster and sentinels:
            raise ConfigurationError("Sentinel watches a primary and its replicas, not a Redis Cluster")
        sentinel = _sentinel_settings(options, bool(sentinels))
        wait_replicas = options.get("wait_replicas", 0)
        if isinstance(wait_replicas, bool) or not isinstance(wait_replicas, int) or wait_replicas < 0:
            raise ConfigurationError(f"'wait_replicas' must be an int >= 0, not {wait_replicas!r}")
        if cluster and wait_replicas:
            raise ConfigurationError(
                "'wait_replicas' is not available on a Redis Cluster: WAIT covers the writes of one "
                "connection to one node, and a cluster acquire or keep-alive writes on several primaries "
                "in separate steps; for fencing across failovers use the database or ZooKeeper backend"
            )
        # A handed-over term is written by a release script that WAIT cannot cover, and a cluster's
        # release cannot reach the waiting session's keys: both release the name to all instead.
        hand_over = _flag(options, "hand_over", default=not (cluster or wait_replicas))
        if hand_over and (cluster or wait_replicas):
            raise ConfigurationError(
                "'hand_over' needs a single Redis node without 'wait_replicas': a cluster's release "
                "cannot reach the waiting session's keys, and WAIT cannot cover a term written by "
                "another session's release"
            )
        return cls(
            cache=cache,
            url=url,
            startup_nodes=nodes,
            cluster=cluster,
            wait_replicas=wait_replicas,
            check_eviction=_flag(options, "check_eviction", default=True),
            hand_over=hand_over,
            connection={key: options[key] for key in CONNECTION_OPTIONS if key in options},
            sentinels=sentinels,
            **sentinel,
        )


def _optional_str(options: Mapping[str, Any], key: str) -> str | None:
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"'{key}' must be a non-empty string, not {value!r}")
    return value


def _flag(options: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = options.get(key, default)
    if not isinstance(value, bool):
        raise ConfigurationError(f"'{key}' must be True or False, not {value!r}")
    return value


def _addresses(value: object, key: str) -> tuple[tuple[str, int], ...]:
    """Cluster nodes or Sentinels: ``"host:port"`` or ``(host, port)`` pairs (lists too, as JSON has them)."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise ConfigurationError(
            f"'{key}' must be a non-empty list of (host, port) pairs or 'host:port', not {value!r}"
        )
    addresses = []
    for entry in value:
        if isinstance(entry, str):
            host, _, port_text = entry.rpartition(":")
            port: object = int(port_text) if port_text.isdigit() else None
        elif isinstance(entry, list | tuple) and len(entry) == 2:
            host, port = entry
        else:
            host, port = "", None
        if not (isinstance(host, str) and host) or isinstance(port, bool) or not isinstance(port, int):
            raise ConfigurationError(f"'{key}' entry {entry!r} is not 'host:port' nor a (host, port) pair")
        if not 0 < port < 65536:
            raise ConfigurationError(f"'{key}' entry {entry!r} has no valid port (1 to 65535)")
        addresses.append((host, port))
    return tuple(addresses)


def _sentinel_settings(options: Mapping[str, Any], sentinels: bool) -> dict[str, Any]:
    """``service``, ``db``, ``sentinel_options`` and ``min_other_sentinels``: only with ``sentinels``."""
    if not sentinels:
        stray = sorted(key for key in SENTINEL_OPTIONS - {"sentinels"} if key in options)
        if stray:
            raise ConfigurationError(f"{', '.join(map(repr, stray))} go with 'sentinels' (Redis Sentinel)")
        return {}
    service = _optional_str(options, "service")
    if service is None:
        raise ConfigurationError(
            "'sentinels' needs 'service': the name the Sentinels monitor the primary under "
            "(their 'sentinel monitor <service> ...' line)"
        )
    db = options.get("db", 0)
    if isinstance(db, bool) or not isinstance(db, int) or db < 0:
        raise ConfigurationError(f"'db' must be an int >= 0, not {db!r}")
    quorum = options.get("min_other_sentinels", 0)
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 0:
        raise ConfigurationError(f"'min_other_sentinels' must be an int >= 0, not {quorum!r}")
    own = options.get("sentinel_options", {})
    if not isinstance(own, Mapping):
        raise ConfigurationError(f"'sentinel_options' must be a dict, not {type(own).__name__}")
    unknown = sorted(set(own) - CONNECTION_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown 'sentinel_options' key(s) {', '.join(map(str, unknown))}; "
            f"known: {', '.join(sorted(CONNECTION_OPTIONS))}"
        )
    return {"service": service, "db": db, "sentinel_connection": dict(own), "min_other_sentinels": quorum}


def borrowed_cache_problem(cache: str | None) -> str | None:
    """Why the django-redis cache the backend borrows its server from cannot lend one, or None.

    Read from ``settings.CACHES`` without connecting, so the system checks can say it.
    """
    if cache is None:
        return None
    from django.conf import settings

    if cache not in settings.CACHES:
        problem = "which is not in CACHES"
    elif not _is_django_redis(settings.CACHES[cache].get("BACKEND")):
        problem = "which is not a django-redis cache"
    else:
        return None
    return f"it takes its server from the cache {cache!r}, {problem}"


def _is_django_redis(path: object) -> bool:
    from django.utils.module_loading import import_string

    try:
        from django_redis.cache import RedisCache

        cache_class = import_string(str(path))
    except ImportError:
        return False
    return isinstance(cache_class, type) and issubclass(cache_class, RedisCache)
