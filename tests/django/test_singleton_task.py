"""@singleton_task in leader and lock mode, on plain functions and management-command style methods."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid

import pytest
from django.test import override_settings

from django_simba import registry, singleton_task
from django_simba.decorators import Skipped, current_term, task_name_for
from django_simba.testing.waiting import wait_until
from tests.django.engines import fresh_engine_on

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}


fresh_engine = fresh_engine_on(SIMBA)


def test_leader_mode_runs_on_the_leader_with_its_term():
    @singleton_task("reports.nightly")
    def nightly(x):
        return x, current_term().token

    assert nightly(7) == (7, 1)
    assert nightly.simba_name == "reports.nightly"


def test_leader_mode_skips_where_another_instance_leads():
    engine = registry.get_engine()
    backend = engine.backend
    other = backend.open_session(30, "host=other pid=1").session_id
    backend.acquire(other, "reports.other")

    @singleton_task("reports.other")
    def job():
        raise AssertionError("must not run")

    result = job()
    assert isinstance(result, Skipped) and not result
    assert result.holder.metadata == "host=other pid=1"
    assert "not the leader" in str(result)


def test_lock_mode_runs_once_at_a_time_and_skips_the_rest():
    entered = threading.Event()
    leave = threading.Event()

    @singleton_task("import.batch", mode="lock")
    def batch():
        entered.set()
        leave.wait(10)
        return "done"

    results = []
    first = threading.Thread(target=lambda: results.append(batch()))
    first.start()
    assert entered.wait(10)
    assert isinstance(batch(), Skipped)
    leave.set()
    first.join(10)
    assert results == ["done"]
    assert batch() == "done"


def test_default_names_are_valid_lease_names():
    def local():
        pass

    name = task_name_for(local)
    assert name.startswith("task:tests.django.test_singleton_task.")
    assert "<" not in name


def test_bad_arguments_fail_at_decoration():
    with pytest.raises(ValueError):
        singleton_task("x", mode="everywhere")
    with pytest.raises(ValueError):
        singleton_task("bad name")


def test_a_coroutine_function_runs_under_the_lock_and_sees_its_term():
    import asyncio

    @singleton_task("async.job", mode="lock")
    async def job():
        await asyncio.sleep(0)
        term = current_term()
        return term.token, term.is_valid()

    token, valid = asyncio.run(job())
    assert token > 0 and valid
    assert current_term() is None
    engine = registry.get_engine()
    assert engine.owner("async.job") is None  # given back once the coroutine finished
    other = engine.backend.open_session(30, "host=other").session_id
    engine.backend.acquire(other, "async.job")
    assert isinstance(asyncio.run(job()), Skipped)


# -- permits: at most N calls at once ------------------------------------------------------------


def test_permits_let_n_calls_run_at_once_and_skip_the_next():
    inside, leave = threading.Barrier(3), threading.Event()

    @singleton_task("exports.daily", permits=2)
    def export():
        term = current_term()
        inside.wait(10)
        leave.wait(10)
        return term.name

    assert export.simba_mode == "lock" and export.simba_permits == 2
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(export())) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait(10)  # both calls hold a permit now
    skipped = export()
    assert isinstance(skipped, Skipped) and skipped.reason == "all 2 permits are held"
    leave.set()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == ["exports.daily:1", "exports.daily:2"]  # type: ignore[type-var]
    assert registry.get_engine().leases("exports.daily:") == []


def test_permits_with_a_timeout_wait_their_turn():
    guard = threading.Lock()
    holding, peak = [0], [0]

    @singleton_task("exports.queued", permits=2, timeout=30)
    def export():
        with guard:
            holding[0] += 1
            peak[0] = max(peak[0], holding[0])
        threading.Event().wait(0.01)  # the work, so that calls overlap
        with guard:
            holding[0] -= 1
        return current_term().token

    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.extend(export() for _ in range(5))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 20 and not any(isinstance(result, Skipped) for result in results)
    assert peak[0] == 2


def test_bad_permits_fail_at_decoration():
    with pytest.raises(ValueError, match="permits needs mode='lock'"):
        singleton_task("x", mode="leader", permits=2)
    with pytest.raises(ValueError, match="permits must be from 1"):
        singleton_task("x", permits=0)
    with pytest.raises(ValueError, match="at most 126 characters"):
        singleton_task("x" * 127, permits=2)


def test_a_default_name_leaves_room_for_the_permits():
    def a_function_with_a_name_long_enough_to_be_cut_when_it_is_turned_into_a_default_lease_name_for_a_task():
        return current_term().name

    guarded = singleton_task(permits=12)(
        a_function_with_a_name_long_enough_to_be_cut_when_it_is_turned_into_a_default_lease_name_for_a_task
    )
    assert len(guarded.simba_name) == 128 - len(":12")
    assert guarded().startswith(guarded.simba_name + ":")


def test_a_coroutine_function_gives_its_permit_back_from_any_worker_thread():
    import asyncio

    @singleton_task("async.exports", permits=2, timeout=10)
    async def job():
        await asyncio.sleep(0)
        return current_term().name

    async def main():
        return await asyncio.gather(job(), job(), job())

    names = asyncio.run(main())
    assert all(isinstance(name, str) and name.startswith("async.exports:") for name in names)
    # Every permit given back. A permit granted to a call that already had another is freed by
    # the engine in the background, so it may still be on its way back for a moment.
    engine = registry.get_engine()
    wait_until(lambda: engine.leases("async.exports:") == [], 5, message="every permit given back")


@pytest.mark.redis
def test_permits_hold_across_real_processes(tmp_path):
    """Four processes run a ``permits=2`` task on Redis: never more than two calls at once."""
    from tests.django.processes import ROOT, child_environ, forget_redis_keys, redis_url_or_skip

    url = redis_url_or_skip()
    name = f"exports.{uuid.uuid4().hex[:12]}"
    state = tmp_path / "state.json"
    simba = {"BACKEND": "redis", "OPTIONS": {"url": url}, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}
    environ = child_environ("tests.django.process_settings", simba)
    argv = [sys.executable, "-m", "tests.django.permit_worker", str(state), "5", name, "2"]
    workers = [subprocess.Popen(argv, env=environ, cwd=ROOT) for _ in range(4)]
    try:
        codes = [worker.wait(120) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
        forget_redis_keys(url, f"*{name}*")
    assert codes == [0, 0, 0, 0]
    seen = json.loads(state.read_text())
    assert len(seen["entries"]) == 20 and seen["holding"] == 0
    assert seen["peak"] == 2, f"{seen['peak']} calls at once"
    by_permit: dict[str, list[int]] = {}
    for permit, token in seen["entries"]:
        by_permit.setdefault(permit, []).append(token)
    assert set(by_permit) <= {f"{name}:1", f"{name}:2"}
    for permit, tokens in by_permit.items():
        assert tokens == sorted(set(tokens)), f"{permit}: {tokens}"


def test_a_non_leader_logs_its_skips_once_per_change_of_leader(caplog, monkeypatch):
    engine = registry.get_engine()
    backend = engine.backend
    acquire = backend.acquire

    def others_only(session_id, name, **kwargs):  # this process stays a candidate that never wins
        return None if session_id == engine.session_id else acquire(session_id, name, **kwargs)

    monkeypatch.setattr(backend, "acquire", others_only)
    first = backend.open_session(30, "host=first pid=1").session_id
    backend.acquire(first, "reports.skips")

    @singleton_task("reports.skips")
    def job():
        raise AssertionError("must not run")

    def skips_logged() -> list[str]:
        records = [r for r in caplog.records if r.name == "django_simba.tasks" and r.levelname == "INFO"]
        return [r.getMessage() for r in records]

    with caplog.at_level("INFO", logger="django_simba.tasks"):
        for _ in range(5):
            assert isinstance(job(), Skipped)
        assert len(skips_logged()) == 1 and "host=first pid=1" in skips_logged()[0]
        backend.close_session(first)
        second = backend.open_session(30, "host=second pid=2").session_id
        assert backend.acquire(second, "reports.skips") is not None
        for _ in range(5):
            job()
    logged = skips_logged()
    assert len(logged) == 2 and "host=second pid=2" in logged[1], logged
    backend.close_session(second)


@pytest.mark.redis
def test_leader_mode_during_an_outage_is_skipped_with_the_reason_never_raised(own_redis):
    from django_simba.backends.redis import RedisBackend

    other = RedisBackend({"url": own_redis.url}, timeout=1)
    held = other.open_session(300, "host=other pid=1").session_id
    other.acquire(held, "reports.outage")
    simba = {"BACKEND": "redis", "OPTIONS": {"url": own_redis.url}, "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}

    @singleton_task("reports.outage", wait_for_election=5)
    def periodic():
        raise AssertionError("must not run")

    with override_settings(SIMBA=simba):
        try:
            assert "not the leader" in periodic().reason
            own_redis.stop()
            skipped = periodic()  # a periodic loop needs no try/except of its own
            assert isinstance(skipped, Skipped), skipped
            assert "the backend cannot be reached" in skipped.reason and skipped.holder is None
        finally:
            registry.reset()
            other.close()
