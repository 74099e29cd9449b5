"""Groups: join, leave, members, change callback, rejoin in a new session."""

from __future__ import annotations

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine
from django_simba.testing import wait_until

from .conftest import RENEW


def test_join_leave_and_members(threaded_engine: Engine):
    group = threaded_engine.group("workers")
    assert group.members() == []
    group.join()
    assert [m.session_id for m in group.members()] == [threaded_engine.session_id]
    assert group.members()[0].metadata == "threaded"
    assert group.is_member()
    group.leave()
    assert group.members() == []


def test_change_callback_sees_joins_and_expiries(threaded_engine: Engine):
    backend = threaded_engine.backend
    seen = []
    group = threaded_engine.group("watched", on_change=lambda members: seen.append(len(members)))
    wait_until(lambda: seen == [0], 5, message="initial view")
    other = backend.open_session(30, "short-lived").session_id
    backend.join(other, "watched")
    wait_until(lambda: seen[-1] == 1, 5, message="join seen")
    backend.keep_alive(other, 0.05)  # shortened once the join is seen: a loaded machine may be slow
    wait_until(lambda: seen[-1] == 0, 5, message="expiry seen without any notification")
    group.close()


def test_membership_follows_the_process_into_a_new_session(runtime, make_engine, backend: MemoryBackend):
    engine = make_engine(runtime)
    engine.start()
    runtime.run_until_true(lambda: engine.session_id is not None, 5)
    group = engine.group("members")
    # join from the simulated process: the backend call is direct, the session is already live
    group.join()
    first = engine.session_id
    backend.lose_sessions()
    runtime.run_until_true(lambda: engine.session_id not in (None, first), RENEW + 1)
    runtime.run_until_true(
        lambda: [m.session_id for m in backend.members("members")] == [engine.session_id], 1
    )
