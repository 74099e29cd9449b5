"""Observers: a hook nobody listens to costs no callback, an inline one runs in the caller's thread.

A grant and an end come at every lock cycle: an observer that would do nothing must not wake the
callback thread for it, and one that only counts (metrics) runs at once, where the state changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from django_simba.backends.memory import MemoryBackend
from django_simba.engine import Engine, EngineConfig, EngineObserver, ThreadRuntime
from django_simba.engine.observer import Hook
from django_simba.engine.term import EndReason, Term
from django_simba.testing import wait_until


class CountingRuntime(ThreadRuntime):
    """Counts the jobs handed to the callback thread."""

    def __init__(self) -> None:
        super().__init__()
        self.callbacks = 0

    def run_callback(self, fn: Callable[[], None]) -> None:
        self.callbacks += 1
        super().run_callback(fn)


class Heard(EngineObserver):
    """Records the term hooks it hears, with the thread each ran on; ``listening`` says whether it listens."""

    def __init__(self, listening: bool = True) -> None:
        self.listening = listening
        self.heard: list[tuple[str, str, threading.Thread]] = []

    def listens(self, hook: Hook) -> bool:
        return self.listening and super().listens(hook)

    def term_started(self, kind: str, term: Term) -> None:
        self.heard.append(("started", term.name, threading.current_thread()))

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        self.heard.append((f"ended {reason.value}", term.name, threading.current_thread()))


class InlineHeard(Heard):
    inline = True


@pytest.fixture
def runtime() -> CountingRuntime:
    return CountingRuntime()


@pytest.fixture
def engine(runtime: CountingRuntime) -> Iterator[Engine]:
    engine = Engine(MemoryBackend(timeout=1.0), EngineConfig(lease_duration=2.0, renew_interval=0.5), runtime)
    engine.wait_for_session(5)
    yield engine
    engine.close()


def cycles(engine: Engine, name: str, count: int) -> None:
    lock = engine.lock(name)
    for _ in range(count):
        lock.acquire(0)
        lock.release()


def test_hooks_nobody_listens_to_queue_no_callback(runtime, engine):
    deaf, bare = Heard(listening=False), EngineObserver()  # bare overrides nothing: it listens to nothing
    engine.observers.extend([deaf, bare])
    before = runtime.callbacks
    cycles(engine, "observed:deaf", 5)
    assert runtime.callbacks == before
    assert deaf.heard == []


def test_one_callback_per_event_tells_every_listening_observer_in_order(runtime, engine):
    first, second = Heard(), Heard()
    engine.observers.extend([first, second])
    before = runtime.callbacks
    cycles(engine, "observed:both", 3)
    assert runtime.callbacks - before == 6  # a grant and an end per cycle, not one per observer
    expected = ["started", "ended released"] * 3
    wait_until(lambda: len(second.heard) == len(expected), 5, message="the second observer heard every event")
    assert [event for event, _, _ in first.heard] == expected
    assert [event for event, _, _ in second.heard] == expected
    assert all(thread.name == "simba-callbacks" for _, _, thread in first.heard + second.heard)


def test_an_inline_observer_hears_in_the_callers_thread_before_the_call_returns(runtime, engine):
    inline = InlineHeard()
    engine.observers.append(inline)
    before = runtime.callbacks
    lock = engine.lock("observed:inline")
    lock.acquire(0)
    assert [event for event, _, _ in inline.heard] == ["started"]
    lock.release()
    assert [event for event, _, _ in inline.heard] == ["started", "ended released"]
    assert {thread for _, _, thread in inline.heard} == {threading.current_thread()}
    assert runtime.callbacks == before


@pytest.mark.parametrize("inline", [False, True], ids=["on the callback thread", "inline"])
def test_an_observer_that_raises_is_logged_and_the_others_still_hear(engine, caplog, inline):
    class Broken(EngineObserver):
        def term_started(self, kind: str, term: Term) -> None:
            raise RuntimeError("broken observer")

    Broken.inline = inline
    after = InlineHeard() if inline else Heard()
    engine.observers.extend([Broken(), after])
    cycles(engine, "observed:broken", 1)
    wait_until(lambda: len(after.heard) == 2, 5, message="the next observer heard both")
    wait_until(lambda: "broken observer" in caplog.text, 5, message="the error was logged")
    assert "raised in term_started" in caplog.text
