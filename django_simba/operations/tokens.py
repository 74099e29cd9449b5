"""The highest token issued on the configured backend: what ``TOKEN_FLOOR`` must pass on the next one.

A backend that keeps its records in django-simba's tables (the database backend)
keeps a name's row, with its last token, after the name is freed, until the purge
reclaims the rows of idle names; their tokens are at most the table's reclaim
floor, which counts too.

Redis keeps no such list: the hash of a name nobody holds expires a minute after
its last term ended, and that name's next term takes its token from the server's
clock, in microseconds (``lua/_marker.lua``). A scan of the live hashes misses the
names whose hash expired, whose tokens may be the highest. The floor from Redis is
therefore the server's ``TIME`` in microseconds (the highest over a Cluster's
primaries): every token Redis ever issued was taken from that clock, or counted up
from such a token one term at a time, never faster than the clock runs. The names
held now are listed beside it.

ZooKeeper keeps no such list either (see docs/moving.rst for its figure). Tokens are
shown as the engine hands them out: the backend's plus the current ``TOKEN_FLOOR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..spi import LeaseBackend, NotSupported, validate_prefix


@dataclass(frozen=True, slots=True)
class IssuedTokens:
    """Every name's last token that the backend still lists (under the prefix), and what bounds the rest.

    ``clock``: on a backend whose tokens come from its clock (Redis), that clock now, the floor
    included: above every token it ever issued, listed or not. ``None`` where every name is listed.
    """

    backend: str
    floor: int
    tokens: dict[str, int]
    clock: int | None = None
    #: At least every token of a name whose row was reclaimed (under any prefix), lifted alike.
    reclaimed: int = 0

    @property
    def highest(self) -> int:
        """The floor for the next backend: every token issued here is at most this."""
        clock = [] if self.clock is None else [self.clock]
        return max([self.floor, *self.tokens.values(), *clock, self.reclaimed])


def issued_tokens(prefix: str = "") -> IssuedTokens:
    """Read them; NotSupported where the backend lists no tokens, BackendUnavailable when down."""
    from ..conf import get_settings

    validate_prefix(prefix)
    settings = get_settings()
    backend_class = settings.backend_class
    if backend_class.uses_tables:
        return _from_tables(backend_class, settings, prefix)
    if backend_class.vendor == "redis":
        return _from_redis(settings, prefix)
    raise NotSupported(
        f"the {settings.backend_alias} backend keeps no list of tokens to read: see docs/moving.rst "
        "for how to find the highest one there"
    )


def _from_tables(backend_class: type[LeaseBackend], settings: Any, prefix: str) -> IssuedTokens:
    from django.db import DatabaseError

    from ..models import Lease, ReclaimFloor
    from ..spi import BackendUnavailable

    alias = backend_class.tables_alias(settings.options)
    rows = Lease.objects.using(alias).order_by("name")
    if prefix:
        rows = rows.filter(name__gte=prefix, name__lt=prefix + "~")  # a range: names compare byte by byte
    try:
        found = {name: token + settings.token_floor for name, token in rows.values_list("name", "token")}
        reclaim_floor = ReclaimFloor.objects.using(alias).values_list("floor", flat=True).first()
    except DatabaseError as error:
        raise BackendUnavailable(f"database {alias!r}: {type(error).__name__}: {error}") from error
    reclaimed = reclaim_floor + settings.token_floor if reclaim_floor else 0
    return IssuedTokens(settings.backend_alias, settings.token_floor, found, reclaimed=reclaimed)


def _from_redis(settings: Any, prefix: str) -> IssuedTokens:
    from .status import tool_backend

    with tool_backend() as backend:
        held = {info.name: info.token for info in sorted(backend.leases(prefix), key=lambda i: i.name)}
        clock = redis_clock_us(backend)
    return IssuedTokens(
        settings.backend_alias, settings.token_floor, held, clock=clock + settings.token_floor
    )


def redis_clock_us(backend: LeaseBackend) -> int:
    """The Redis server's ``TIME`` in microseconds; on a Cluster the latest of its primaries'."""
    from redis.cluster import RedisCluster

    from ..backends.redis.scripting import translated

    store: Any = backend.store  # type: ignore[attr-defined]  # a RedisBackend, its floor wrapper or not
    with translated("TIME", backend.timeout):
        client = store.scripting.client
        if isinstance(client, RedisCluster):
            cluster: Any = client  # redis-py's cluster client is untyped
            replies = cluster.execute_command("TIME", target_nodes=RedisCluster.PRIMARIES)
            times = list(replies.values()) if isinstance(replies, dict) else [replies]
        else:
            times = [client.time()]
    return max(int(seconds) * 1_000_000 + int(micros) for seconds, micros in times)
