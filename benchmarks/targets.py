"""Everything the benchmark can measure: django-simba, its SPI alone, the raw floors and the peers.

A target is one subject on one backend family. Its factories are named by
reference (``"module:function"`` and arguments) so a worker process can build
them; see ``peers/base.py`` for the interfaces they return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .workers import resolve

FAMILIES = ("memory", "redis", "postgresql", "mysql", "sqlite", "zookeeper")

#: What a target is to the checks of the table.
SIMBA, SPI, FLOOR, PEER, NATIVE = "simba", "spi", "floor", "peer", "native"

Ref = tuple[str, tuple[Any, ...]]


def build(ref: Ref) -> Any:
    """The factory a reference names (called with its arguments when it has some)."""
    path, args = ref
    factory = resolve(path)
    return factory(*args) if args else factory


@dataclass(frozen=True)
class Target:
    family: str
    subject: str
    role: str
    lock: Ref | None = None
    candidate: Ref | None = None
    holder: Ref | None = None
    contends: bool = True
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.family}/{self.subject}"

    @property
    def in_process(self) -> bool:
        """Only the memory backend: several "processes" are engines in one process."""
        return self.family == "memory"


_SUBJECTS = "benchmarks.simba_subjects"
_RAW = "benchmarks.peers.raw"
_TOOZ = "benchmarks.peers.tooz_peers"
_REDIS = "benchmarks.peers.redis_peers"
_KAZOO = "benchmarks.peers.kazoo_peers"


def _simba(family: str, note: str = "") -> list[Target]:
    return [
        Target(
            family,
            "django-simba",
            SIMBA,
            lock=(f"{_SUBJECTS}:lock_factory", (family,)),
            candidate=(f"{_SUBJECTS}:candidate_factory", (family,)),
            holder=(f"{_SUBJECTS}:holder_factory", (family,)),
            note=note,
        ),
        Target(
            family,
            "django-simba SPI",
            SPI,
            lock=(f"{_SUBJECTS}:spi_lock_factory", (family,)),
            contends=False,
            note="backend.acquire + backend.release, no engine",
        ),
    ]


TARGETS: list[Target] = [
    *_simba("memory", "in-process backend: contenders are threads"),
    *_simba("redis"),
    Target("redis", "raw SET NX PX + DEL", FLOOR, lock=(f"{_RAW}:make_redis", ()), contends=False),
    Target(
        "redis",
        "tooz",
        PEER,
        lock=(f"{_TOOZ}:make_redis_lock", ()),
        candidate=(f"{_TOOZ}:make_redis_candidate", ()),
        holder=(f"{_TOOZ}:make_redis_holder", ()),
    ),
    Target(
        "redis",
        "python-redis-lock",
        PEER,
        lock=(f"{_REDIS}:make_python_redis_lock", ()),
        candidate=(f"{_REDIS}:make_python_redis_lock_candidate", ()),
    ),
    Target("redis", "pottery Redlock", PEER, lock=(f"{_REDIS}:make_pottery", ())),
    *_simba("postgresql"),
    Target("postgresql", "raw upsert + update", FLOOR, lock=(f"{_RAW}:make_postgresql", ()), contends=False),
    Target(
        "postgresql",
        "advisory lock",
        NATIVE,
        lock=(f"{_RAW}:make_pg_advisory", ()),
        candidate=(f"{_RAW}:make_pg_advisory_candidate", ()),
        note="session-bound, no write, no fencing token",
    ),
    Target("postgresql", "tooz", PEER, lock=(f"{_TOOZ}:make_postgresql_lock", ())),
    *_simba("mysql"),
    Target("mysql", "raw upsert + update", FLOOR, lock=(f"{_RAW}:make_mysql", ()), contends=False),
    Target(
        "mysql",
        "GET_LOCK",
        NATIVE,
        lock=(f"{_RAW}:make_mysql_get_lock", ()),
        note="session-bound, no write, no fencing token",
    ),
    Target(
        "mysql",
        "tooz",
        PEER,
        lock=(f"{_TOOZ}:make_mysql_lock", ()),
        candidate=(f"{_TOOZ}:make_mysql_candidate", ()),
    ),
    *_simba("sqlite"),
    Target("sqlite", "raw upsert + update", FLOOR, lock=(f"{_RAW}:make_sqlite", ()), contends=False),
    *_simba("zookeeper"),
    Target("zookeeper", "raw create + delete", FLOOR, lock=(f"{_RAW}:make_zookeeper", ()), contends=False),
    Target(
        "zookeeper",
        "tooz",
        PEER,
        lock=(f"{_TOOZ}:make_zookeeper_lock", ()),
        candidate=(f"{_TOOZ}:make_zookeeper_candidate", ()),
        holder=(f"{_TOOZ}:make_zookeeper_holder", ()),
    ),
    Target(
        "zookeeper",
        "kazoo",
        PEER,
        lock=(f"{_KAZOO}:make_lock", ()),
        candidate=(f"{_KAZOO}:make_candidate", ()),
    ),
]


def select(families: list[str] | None) -> list[Target]:
    return [target for target in TARGETS if families is None or target.family in families]
