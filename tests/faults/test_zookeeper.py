"""Real faults on the ZooKeeper backend: a standalone server, and a node of a 3-node ensemble.

ZooKeeper ends a session on its own once it hears nothing for the session
timeout (here the 2 s lease), so a killed or paused holder is replaced then.
A session can also be ended from outside: another client that knows its id and
password attaches to it and closes it (kazoo's own test harness does this). The
holder learns of it only at its next keep-alive, so for that moment it still
believes in a term the server already ended: that is what fencing is for, and
the test shows the register refusing its writes then.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_simba.testing import wait_until
from tests.faults import injectors, scenario
from tests.faults.fleet import Event, wait_for
from tests.faults.scenario import TIMING, FaultRun

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(120)]


def start(run: FaultRun, hosts: str, label: str) -> None:
    run.start(label, "zookeeper", {"hosts": hosts, "root": f"/simba-faults/{run.name}"})


def test_holder_killed(fault_run: FaultRun, zookeeper_server: Any) -> None:
    start(fault_run, zookeeper_server.hosts, "zookeeper")
    scenario.sigkill_holder(fault_run)


def test_holder_paused_past_its_lease(fault_run: FaultRun, zookeeper_server: Any) -> None:
    start(fault_run, zookeeper_server.hosts, "zookeeper")
    scenario.sigstop_holder(fault_run)


def test_holder_session_expired_by_the_server(fault_run: FaultRun, zookeeper_server: Any) -> None:
    start(fault_run, zookeeper_server.hosts, "zookeeper")
    fleet = fault_run.fleet
    assert fleet is not None
    victim, acquired = fleet.fresh_holder()
    token = acquired["token"]
    assert acquired["zk"], "the worker did not report its ZooKeeper session"
    session_id, password = acquired["zk"]
    fault_at = time.monotonic()
    injectors.expire_zookeeper_session(zookeeper_server.hosts, (session_id, bytes.fromhex(password)))
    expired_at = time.monotonic()
    new = fault_run.takeover(fault_at, victim, TIMING.takeover_bound + 10)
    closing = expired_at - fault_at  # the intruder's connect and close

    def ended() -> Event | None:
        return next(
            (e for e in victim.events() if e.get("token") == token and e["e"] in ("lost", "released")), None
        )

    end = wait_for(ended, TIMING.lease + 5, f"{victim.id} learning that its session ended")
    fault_run.keep_going(expired_at)
    # it may believe in its term until its next keep-alive answers: renew interval plus a call
    grace = TIMING.renew + TIMING.latency
    verdict = fault_run.finish(
        "session closed by server",
        takeover=new["at"] - fault_at,
        bound=closing + TIMING.retry + TIMING.latency,
        detection=end["t"] - expired_at,
        revoked={(victim.id, token): (expired_at, grace)},
        note=f"holder learnt it {end['t'] - expired_at:.2f} s after ({end['e']}); take-over via the watch",
    )
    assert verdict.terms > 0


def test_ensemble_leader_restarted(fault_run: FaultRun, zookeeper_ensemble: Any) -> None:
    """The leader goes down and comes back: the rest elect a new one, and the lock keeps changing hands."""
    start(fault_run, zookeeper_ensemble.hosts, "zookeeper/ensemble")
    fleet = fault_run.fleet
    assert fleet is not None
    victim, acquired = fleet.fresh_holder()
    leader = zookeeper_ensemble.leader()
    others = [node for node in zookeeper_ensemble.nodes if node is not leader]
    fault_at = time.monotonic()
    leader.stop()
    wait_until(lambda: "leader" in [node.mode() for node in others], 30, message="a new leader elected")
    election = time.monotonic() - fault_at
    leader.start()  # rejoins as a follower
    rejoined_at = time.monotonic()
    new = fault_run.first_term_after(fault_at, election + TIMING.takeover_bound + 10)
    fault_run.keep_going(rejoined_at)
    lost = any(e["e"] == "lost" and e["token"] == acquired["token"] for e in victim.events())
    fault_run.finish(
        "leader node restart",
        takeover=new["at"] - fault_at,
        bound=election + TIMING.takeover_bound,
        detection=election,
        note=f"election {election:.2f} s, rejoined after {rejoined_at - fault_at:.2f} s; "
        f"holder {'lost' if lost else 'kept'} its term; take-over = next term",
    )
