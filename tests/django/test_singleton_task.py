"""@singleton_task in leader and lock mode, on plain functions and management-command style methods."""

from __future__ import annotations

import threading

import pytest
from django.test import override_settings

from django_simba import registry, singleton_task
from django_simba.decorators import Skipped, current_term, task_name_for

SIMBA = {"BACKEND": "memory", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1}


@pytest.fixture(autouse=True)
def fresh_engine():
    with override_settings(SIMBA=SIMBA):
        yield
    registry.reset()


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
