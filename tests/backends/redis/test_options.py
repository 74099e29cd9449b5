"""Options are validated when the backend is built, before any I/O."""

from __future__ import annotations

import pytest

from django_simba.backends.redis import RedisBackend
from django_simba.spi import ConfigurationError


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"url": "redis://x", "cache": "redis"}, "not cache and url"),
        ({"url": "redis://x", "startup_nodes": ["h:1"]}, "not url and startup_nodes"),
        ({"url": "redis://x", "colour": "blue"}, "unknown Redis backend option(s) colour"),
        ({"url": "redis://x", "wait_replicas": -1}, "wait_replicas"),
        ({"url": "redis://x", "wait_replicas": True}, "wait_replicas"),
        ({"url": "redis://x", "cluster": "yes"}, "'cluster' must be True or False"),
        ({"url": "redis://x", "check_eviction": 0}, "'check_eviction' must be True or False"),
        ({"startup_nodes": ["127.0.0.1:7000"], "cluster": False}, "set 'cluster': True"),
        ({"startup_nodes": ["no-port"]}, "not 'host:port'"),
        ({"startup_nodes": "127.0.0.1:7000"}, "non-empty list"),
        ({"cache": "redis", "cluster": True}, "no Redis Cluster client"),
        ({"url": "redis://x", "cluster": True, "wait_replicas": 1}, "not available on a Redis Cluster"),
        ({"startup_nodes": ["127.0.0.1:7000"], "wait_replicas": 2}, "not available on a Redis Cluster"),
    ],
)
def test_bad_options_are_refused_without_io(options: dict[str, object], complaint: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        RedisBackend(options, timeout=1)
    assert complaint in str(caught.value)


def test_default_is_the_django_redis_default_cache() -> None:
    assert RedisBackend(timeout=1).settings.cache == "default"


def test_startup_nodes_imply_a_cluster() -> None:
    backend = RedisBackend({"startup_nodes": ["127.0.0.1:7000", "localhost:7001"]}, timeout=1)
    assert backend.cluster
    assert backend.settings.startup_nodes == (("127.0.0.1", 7000), ("localhost", 7001))


def test_connection_settings_are_kept_for_the_client() -> None:
    backend = RedisBackend({"url": "rediss://h:1/0", "password": "pw", "ssl_ca_certs": "/ca.pem"}, timeout=1)
    assert dict(backend.settings.connection) == {"password": "pw", "ssl_ca_certs": "/ca.pem"}
    assert backend.settings.check_eviction is True
    assert backend.notifies and not backend.needs_purge and backend.vendor == "redis"
