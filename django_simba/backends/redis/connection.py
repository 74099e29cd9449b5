"""Building the redis-py clients the backend uses, from its options.

Every client gets the backend's timeout as socket and connect timeout, no automatic
retries (an acquire must not be re-sent behind the backend's back, and retries would
multiply the timeout), RESP2 and decoded replies.

With ``{"cache": alias}`` the client comes from django-redis's
``get_redis_connection(alias)``; the backend takes its server, credentials and TLS
settings and opens its own pool with them, so that its calls keep their timeout
whatever the cache's ``SOCKET_TIMEOUT`` is and the application's cache traffic never
starves a keep-alive of a connection.

Under Redis Sentinel (``sentinels`` and ``service``, or a django-redis cache made by its
``SentinelConnectionFactory``) the client is redis-py's ``Sentinel.master_for``: every
connection asks the Sentinels where the primary is when it connects, and a connection that
fails, or finds its server demoted to a replica (``READONLY``), is dropped and connects
again to whichever primary the Sentinels name then. The pub/sub connection is made from the
same pool, so it follows a failover the same way. The Sentinels are asked in turn, each
within its share of the backend's timeout, so finding the primary takes one timeout at most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.retry import Retry
from redis.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
)

from ...spi import ConfigurationError, redact
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


#: Where a server is: under Sentinel, the Sentinels say it.
_ADDRESS = frozenset({"host", "port", "path"})


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
    if options.service is not None:
        return sentinel_client(
            options.sentinels,
            options.service,
            {**settings, "db": options.db},
            options.sentinel_connection,
            options.min_other_sentinels,
            timeout,
        )
    if options.url is not None:
        try:
            return redis.Redis.from_url(options.url, **settings)
        except ValueError as error:  # not chained: redis-py's message quotes pieces of the URL
            raise ConfigurationError(f"invalid Redis url {redact(options.url)!r}: {redact(error)}") from None
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
    except Exception as error:  # not chained: its LOCATION's URL may be quoted in it
        raise ConfigurationError(
            f"cache {alias!r} could not give a Redis connection: {redact(error)}"
        ) from None
    if isinstance(borrowed, RedisCluster):
        raise ConfigurationError(f"cache {alias!r} is a cluster: use 'url' or 'startup_nodes' with 'cluster'")
    pool = borrowed.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        return _client_of_sentinel_cache(alias, pool, settings)
    if pool.connection_class not in _REBUILDABLE:
        raise ConfigurationError(
            f"cache {alias!r} uses {type(pool).__name__} / {pool.connection_class.__name__}, which the Redis "
            "backend cannot take its settings from; give OPTIONS 'url' instead"
        )
    kwargs = {key: value for key, value in pool.connection_kwargs.items() if key in _BORROWED}
    own_pool = redis.ConnectionPool(connection_class=pool.connection_class, **{**kwargs, **settings})
    return redis.Redis(connection_pool=own_pool)


def _client_of_sentinel_cache(
    alias: str, pool: SentinelConnectionPool, settings: dict[str, Any]
) -> redis.Redis:
    """The cache's service, Sentinels and credentials, with the backend's timeouts and pool."""
    if not pool.is_master:
        raise ConfigurationError(
            f"cache {alias!r} gave a pool of replicas: the backend writes to the primary"
        )
    manager = pool.sentinel_manager
    sentinels, sentinel_settings = [], {}
    for client in manager.sentinels:
        sentinel_pool = client.connection_pool
        kwargs = sentinel_pool.connection_kwargs
        sentinels.append((kwargs["host"], kwargs["port"]))
        sentinel_settings = {key: value for key, value in kwargs.items() if key in _BORROWED - _ADDRESS}
        if issubclass(sentinel_pool.connection_class, SSLConnection):
            sentinel_settings["ssl"] = True
    primary = {key: value for key, value in pool.connection_kwargs.items() if key in _BORROWED - _ADDRESS}
    if issubclass(pool.connection_class, SSLConnection):
        primary["ssl"] = True
    timeout = float(settings["socket_timeout"])
    return sentinel_client(
        sentinels,
        pool.service_name,
        {**primary, **settings},
        sentinel_settings,
        manager.min_other_sentinels,
        timeout,
    )


def sentinel_client(
    sentinels: Sequence[tuple[str, int]],
    service: str,
    settings: Mapping[str, Any],
    sentinel_settings: Mapping[str, Any],
    min_other_sentinels: int,
    timeout: float,
) -> redis.Redis:
    """A client of the primary the Sentinels name ``service``; it follows a failover on reconnecting."""
    share = timeout / len(sentinels)  # the Sentinels are asked one after the other
    own = {**client_settings(share), **sentinel_settings}
    manager = Sentinel(  # type: ignore[no-untyped-call,unused-ignore]  # typed since redis 8
        list(sentinels), min_other_sentinels=min_other_sentinels, sentinel_kwargs=own
    )
    return redis.Redis.from_pool(_SentinelPool(service, manager, **settings))


class _PrimaryConnection(SentinelManagedConnection):
    """A connection that asks the Sentinels where the primary is whenever it connects again.

    redis-py (8.1) reconnects a dropped connection on its next command without asking them
    (``send_packed_command`` calls ``connect_check_health``, not the Sentinel-aware ``connect``),
    and the backend keeps its connections across calls: after a failover one would knock on the
    dead primary's address for ever.
    """

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        self.connect()  # type: ignore[no-untyped-call]  # returns at once on an open socket
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


class _PrimarySSLConnection(_PrimaryConnection, SSLConnection):
    pass


class _SentinelPool(SentinelConnectionPool):
    """A Sentinel pool of :class:`_PrimaryConnection` that closes its connections to the Sentinels
    too when it is closed for good."""

    def __init__(self, service: str, manager: Sentinel, **kwargs: Any) -> None:
        kwargs["connection_class"] = _PrimarySSLConnection if kwargs.pop("ssl", False) else _PrimaryConnection
        super().__init__(service, manager, **kwargs)  # type: ignore[no-untyped-call]

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        if inuse_connections:  # a failover disconnects only the idle ones, and needs the Sentinels
            self.sentinel_manager.close()


def cluster_client(options: RedisOptions, timeout: float) -> RedisCluster:
    settings = client_settings(timeout)
    retry = settings.pop("retry")
    settings.update(options.connection)
    if options.url is not None:
        try:
            return RedisCluster.from_url(options.url, retry=retry, **settings)
        except ValueError as error:  # not chained, as above
            raise ConfigurationError(
                f"invalid Redis Cluster url {redact(options.url)!r}: {redact(error)}"
            ) from None
    nodes = [ClusterNode(host, port) for host, port in options.startup_nodes]  # type: ignore[no-untyped-call]
    return RedisCluster(startup_nodes=nodes, retry=retry, **settings)
