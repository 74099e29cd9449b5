"""Building the redis-py clients the backend uses, from its options.

Every client gets the backend's timeout as socket and connect timeout, no automatic
retries (an acquire must not be re-sent behind the backend's back, and retries would
multiply the timeout), RESP2 and decoded replies.

With ``{"cache": alias}`` the client comes from django-redis's
``get_redis_connection(alias)``; the backend takes its server, credentials and TLS
settings and opens its own pool with them, so that its calls keep their timeout
whatever the cache's ``SOCKET_TIMEOUT`` is and the application's cache traffic never
starves a keep-alive of a connection.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.retry import Retry

from ...spi import ConfigurationError
from .options import RedisOptions

#: Connection classes whose settings are self-contained, so a pool can be rebuilt from them.
_REBUILDABLE = (Connection, SSLConnection, UnixDomainSocketConnection)
#: What the backend takes from the cache's connection settings: where the server is and how to log in.
_BORROWED = frozenset(
    {
        "host",
        "port",
        "path",
        "db",
        "username",
        "password",
        "credential_provider",
        "client_name",
        "socket_keepalive",
        "socket_keepalive_options",
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_ca_data",
        "ssl_check_hostname",
        "ssl_min_version",
        "ssl_ciphers",
        "ssl_password",
    }
)


def client_settings(timeout: float) -> dict[str, Any]:
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
        "decode_responses": True,
        "encoding": "utf-8",
        "protocol": 2,
        "health_check_interval": 0,
    }


def standalone_client(options: RedisOptions, timeout: float) -> redis.Redis:
    settings = {**client_settings(timeout), **options.connection}
    if options.url is not None:
        try:
            return redis.Redis.from_url(options.url, **settings)
        except ValueError as error:
            raise ConfigurationError(f"invalid Redis url {options.url!r}: {error}") from error
    assert options.cache is not None
    return _client_of_cache(options.cache, settings)


def _client_of_cache(alias: str, settings: dict[str, Any]) -> redis.Redis:
    try:
        from django_redis import get_redis_connection
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ConfigurationError(
            "OPTIONS 'cache' needs django-redis: pip install django-simba[redis]"
        ) from error
    try:
        borrowed = get_redis_connection(alias, write=True)
    except (NotImplementedError, KeyError) as error:
        raise ConfigurationError(
            f"cache {alias!r} is not a django-redis cache ({error}): set the Redis backend's OPTIONS "
            "'cache' to a django-redis cache alias, or 'url'"
        ) from error
    except Exception as error:
        raise ConfigurationError(f"cache {alias!r} could not give a Redis connection: {error}") from error
    if isinstance(borrowed, RedisCluster):
        raise ConfigurationError(f"cache {alias!r} is a cluster: use 'url' or 'startup_nodes' with 'cluster'")
    pool = borrowed.connection_pool
    if pool.connection_class not in _REBUILDABLE:
        raise ConfigurationError(
            f"cache {alias!r} uses {type(pool).__name__} / {pool.connection_class.__name__}, which the Redis "
            "backend cannot take its settings from; give OPTIONS 'url' instead"
        )
    kwargs = {key: value for key, value in pool.connection_kwargs.items() if key in _BORROWED}
    own_pool = redis.ConnectionPool(connection_class=pool.connection_class, **{**kwargs, **settings})
    return redis.Redis(connection_pool=own_pool)


def cluster_client(options: RedisOptions, timeout: float) -> RedisCluster:
    settings = client_settings(timeout)
    retry = settings.pop("retry")
    settings.update(options.connection)
    if options.url is not None:
        try:
            return RedisCluster.from_url(options.url, retry=retry, **settings)
        except ValueError as error:
            raise ConfigurationError(f"invalid Redis Cluster url {options.url!r}: {error}") from error
    nodes = [ClusterNode(host, port) for host, port in options.startup_nodes]  # type: ignore[no-untyped-call]
    return RedisCluster(startup_nodes=nodes, retry=retry, **settings)
