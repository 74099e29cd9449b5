"""A Redis failover under Sentinel, under the fenced-register trial: three worker processes, one lock.

The primary is SIGKILLed while a worker holds the lock; the Sentinels promote its replica and
every worker follows it without a restart (the backend's own ``sentinels``/``service``
options). What must hold, judged from the workers' logs and the register's history: no token is
handed out twice, tokens only go up, no write is refused while its term said valid, and the lock
keeps changing hands on the new primary.

A promoted replica never has the scripts' marker, so every failover begins an epoch on the new
primary (docs/redis.rst, docs/sentinel.rst): the terms granted before are over, no new term is
granted for one lease, and the next token comes from the new primary's clock. Replication is
asynchronous, so a write the primary acknowledged just before it died may be missing on the
replica (``test_replicas_behind_when_the_primary_dies`` makes sure of it): its token for the lock
is then below the highest granted, and the first token after the failover must still be above
every one granted before. The take-over, measured from the kill, is bounded by the failover plus
the usual take-over bound (the epoch's one lease, a retry, latency); the summary line gives the
failover, the first token after it and what the promoted replica had. docs/sentinel.rst gives the
figures of six runs of each case.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import server_missing
from tests.faults.fleet import Fleet, wait_for
from tests.faults.scenario import TIMING, FaultRun
from tests.servers.redis_cluster import REDIS_SERVER
from tests.servers.redis_sentinel import SentinelSet, redis_sentinel

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]


@pytest.fixture
def sentinel_set() -> Iterator[SentinelSet]:
    with started_set() as servers:
        yield servers


@pytest.fixture
def partitioned_set() -> Iterator[SentinelSet]:
    """Like ``sentinel_set``; the test cuts the replicas off (``SentinelSet.cut_replication``)."""
    with started_set() as servers:
        yield servers


@contextlib.contextmanager
def started_set() -> Iterator[SentinelSet]:
    if not shutil.which(REDIS_SERVER):
        server_missing(f"{REDIS_SERVER} (to start Redis servers and Sentinels of the tests' own)")
    with redis_sentinel(replicas=2) as servers:
        yield servers


def start_fleet(run: FaultRun, servers: SentinelSet, label: str, wait_replicas: int) -> Fleet:
    """Three workers on the Sentinels' primary, by the backend's own options; a few terms done."""
    options = {
        "sentinels": [list(address) for address in servers.addresses],
        "service": servers.service,
        "wait_replicas": wait_replicas,
    }
    fleet = run.start(label + (f" wait={wait_replicas}" if wait_replicas else ""), "redis", options)
    run.keep_going(0.0, terms=3)
    return fleet


def refused_while_valid(fleet: Fleet) -> list[dict[str, Any]]:
    """Writes sent by a worker that had just found its term valid, and that the register refused."""
    return [e for e in fleet.events() if e["e"] == "write" and e["valid"] and not e["accepted"]]


def kill_primary_and_judge(run: FaultRun, servers: SentinelSet, fault: str, note: str) -> None:
    """SIGKILL the primary, wait for the promoted replica, let the lock change hands on it, judge.

    Beyond the fleet's own verdict: the first term after the failover has a token above every
    one granted before, and no write was refused while its term said valid.
    """
    fleet = run.fleet
    assert fleet is not None
    highest = max(e["token"] for e in fleet.events() if e["e"] == "acquired")
    fault_at = time.monotonic()
    killed = servers.kill_primary()
    servers.heal_replication()  # the dead primary can no longer be caught up with
    promoted, promoted_at = servers.wait_for_new_primary(killed)
    failover = promoted_at - fault_at
    with servers.server_client(promoted) as new_primary:
        # the token the promoted replica has for the lock: below the highest granted, it missed writes
        kept = int(new_primary.hget(f"simba:lease:{{{run.name}}}", "token") or 0)
    new = run.first_term_after(fault_at, failover + TIMING.takeover_bound + 10)
    run.keep_going(promoted_at, terms=3, timeout=30)
    refused = refused_while_valid(fleet)
    run.finish(
        fault,
        takeover=new["at"] - fault_at,
        bound=failover + TIMING.takeover_bound,
        detection=failover,
        note=(
            f"{note}failover {failover:.2f} s; first token after {new['token']} (highest granted "
            f"{highest}, the promoted replica had {kept})"
        ),
    )
    assert new["token"] > highest, f"token {new['token']} after the failover, {highest} before"
    assert not refused, f"writes refused while their term said valid: {refused}"


@pytest.mark.parametrize("wait_replicas", [0, 1])
def test_primary_killed_and_replica_promoted(
    fault_run: FaultRun, sentinel_set: SentinelSet, wait_replicas: int
) -> None:
    fleet = start_fleet(fault_run, sentinel_set, "redis-sentinel", wait_replicas)
    victim, acquired = fleet.fresh_holder()  # the kill hits a holder
    kill_primary_and_judge(
        fault_run, sentinel_set, "primary SIGKILL, failover", f"{victim.id} held {acquired['token']}; "
    )


@pytest.mark.parametrize("wait_replicas", [0, 1])
def test_replicas_behind_when_the_primary_dies(
    fault_run: FaultRun, partitioned_set: SentinelSet, wait_replicas: int
) -> None:
    """The replicas are cut off from the primary while the lock changes hands, then the primary
    dies and a replica that missed those writes is promoted: the new primary's data is older than
    what was granted. Without ``wait_replicas`` the backend's guard against a server that forgot
    its data keeps tokens from going back (docs/redis.rst); with it, nothing the workers trusted
    was missing on the replica."""
    fleet = start_fleet(fault_run, partitioned_set, "redis-sentinel behind", wait_replicas)
    cut_at = time.monotonic()
    partitioned_set.cut_replication()
    if wait_replicas:
        # nothing is acknowledged now: renewals fail, and new terms are given back
        def refused_for_want_of_replicas() -> dict[str, Any] | None:
            return next(
                (e for e in fleet.events()
                 if e["e"] == "log" and e["t"] > cut_at and "replicas acknowledged" in e["message"]),
                None,
            )  # fmt: skip

        wait_for(refused_for_want_of_replicas, TIMING.takeover_bound + 10, "a call refused by WAIT")
    else:
        fault_run.keep_going(cut_at, terms=2)  # terms the replicas never saw
    note = f"replicas cut off {time.monotonic() - cut_at:.2f} s; "
    kill_primary_and_judge(fault_run, partitioned_set, "replicas cut off, failover", note)
