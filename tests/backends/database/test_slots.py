"""The turns of a process's calls (``slots.py``): in order, the session's calls first, none lost."""

from __future__ import annotations

import threading

from django_simba.backends.database.slots import Slots
from django_simba.testing import wait_until


def _waiter(
    slots: Slots, name: str, served: list[str], *, first: bool = False, hold: threading.Event | None = None
) -> threading.Thread:
    """A thread that waits for a turn, notes it was served, and gives the turn back (once ``hold`` is set)."""

    def wait_for_turn() -> None:
        assert slots.take(30, first=first)
        served.append(name)
        if hold is not None:
            hold.wait(30)
        slots.give()

    thread = threading.Thread(target=wait_for_turn, daemon=True)
    thread.start()
    return thread


def _in_line(slots: Slots, count: int) -> None:
    wait_until(lambda: slots.waiting() == count, 10, message=f"{count} waiters in line")


def test_a_freed_turn_goes_to_the_first_waiter_never_to_a_newcomer() -> None:
    slots, served, hold = Slots(1), list[str](), threading.Event()
    assert slots.take(0)
    threads = []
    for name in ("a", "b", "c"):
        threads.append(_waiter(slots, name, served, hold=hold))
        _in_line(slots, len(threads))
    slots.give()
    assert not slots.take(0)  # handed to "a" as it was freed: a newcomer cannot slip in
    hold.set()
    for thread in threads:
        thread.join(10)
    assert served == ["a", "b", "c"]


def test_a_session_call_goes_ahead_of_the_callers_waiting() -> None:
    slots, served = Slots(1), list[str]()
    assert slots.take(0)
    threads = [_waiter(slots, "caller 1", served)]
    _in_line(slots, 1)
    threads.append(_waiter(slots, "caller 2", served))
    _in_line(slots, 2)
    threads.append(_waiter(slots, "keep-alive", served, first=True))
    _in_line(slots, 3)
    slots.give()
    for thread in threads:
        thread.join(10)
    assert served == ["keep-alive", "caller 1", "caller 2"]


def test_a_waiter_that_gives_up_leaves_the_line_and_loses_no_turn() -> None:
    slots = Slots(2)
    assert slots.take(0) and slots.take(0)
    assert not slots.take(0.05)  # both busy: it gives up
    assert slots.waiting() == 0
    slots.give()
    slots.give()
    assert slots.take(0) and slots.take(0)  # both turns came back
    assert not slots.take(0)
