"""The tests' own view of a call waiting for a row lock, on a server that other test runs poll too.

Several race tests hold a row in a transaction, start a call that must wait for it, and let go
only once the server shows the call waiting (``calls.wait_blocked``). Other workers, and other
runs on the same server, ask the server the same question at the same time.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from .calls import Call, wait_blocked
from .conftest import Outsider, on

#: What another worker polled on each server, every few tens of milliseconds.
OTHERS_POLL = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
    "mysql": "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'",
}


@pytest.mark.parametrize(
    "alias", [pytest.param(alias, marks=on(alias), id=alias) for alias in OTHERS_POLL], indirect=True
)
def test_a_call_waiting_for_a_row_is_seen_while_others_poll_the_servers_lock_tables(
    alias: str, outsider: Outsider
) -> None:
    """InnoDB's ``information_schema`` lock tables are a cache refreshed only once nobody has read
    it for 0.1 s: read by two pollers, it stayed stale and a waiting call was never seen."""
    name = f"waiters.{uuid.uuid4().hex[:8]}"
    waiter, observer, other = Outsider(alias), Outsider(alias), Outsider(alias)
    stop, polled = threading.Event(), threading.Event()

    def poll() -> None:
        while not stop.wait(0.02):
            other.execute(OTHERS_POLL[alias])
            polled.set()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    assert polled.wait(5), "the other poller never polled"  # from now on the cache is never idle 0.1 s
    outsider.execute("INSERT INTO simba_lease (name, session_id, token) VALUES (%s, '', 1)", (name,))
    outsider.begin()
    try:
        outsider.execute("UPDATE simba_lease SET token = 2 WHERE name = %s", (name,))
        call = Call(lambda: waiter.execute("UPDATE simba_lease SET token = 3 WHERE name = %s", (name,)))
        wait_blocked(observer, call)
    finally:
        outsider.rollback()  # the waiter's update goes through
        stop.set()
        poller.join(5)
    call.result()
    for connection in (waiter, observer, other):
        connection.close()
