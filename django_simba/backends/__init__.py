"""Backends: one subpackage each, all implementing :class:`django_simba.spi.LeaseBackend`.

Subpackages import their client libraries (psycopg, redis, kazoo) only when used.
"""

BACKEND_ALIASES = {
    "memory": "django_simba.backends.memory.MemoryBackend",
    "database": "django_simba.backends.database.AnyDatabaseBackend",
    "redis": "django_simba.backends.redis.RedisBackend",
    "zookeeper": "django_simba.backends.zookeeper.ZookeeperBackend",
}
