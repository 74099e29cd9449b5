"""A holder hears of its loss: one WARNING per lost term, in the holder's process, with name, token and
reason; one rule for what counts as a loss; callbacks of the wrong shape refused when handed over."""

from __future__ import annotations

import functools
import logging

import pytest

from django_simba.engine import EndReason, Engine
from django_simba.errors import LeaseLost
from django_simba.testing import wait_until


def loss_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return [line for line in lines if "lost its term" in line]


def test_a_force_release_is_logged_once_by_the_holder_with_name_token_and_reason(
    threaded_engine: Engine, caplog
):
    held = threaded_engine.lock("report:42")
    with caplog.at_level(logging.WARNING, logger="django_simba.engine"):
        term = held.acquire(5)
        assert threaded_engine.backend.force_release("report:42")  # an operator, from the admin
        wait_until(lambda: term.ended is not None, 5, message="the next keep-alive noticed")
        with pytest.raises(LeaseLost):
            held.release()
        wait_until(lambda: threaded_engine.keeper.session is not None, 5)
    lines = loss_lines(caplog)
    assert lines == [
        f"django-simba: lock 'report:42' lost its term, token {term.token} "
        "(taken over, or force-released by an operator)"
    ]


@pytest.mark.parametrize("reason", list(EndReason))
def test_every_end_but_the_holders_own_release_is_a_loss(reason):
    assert reason.is_loss is (reason is not EndReason.RELEASED)


def test_a_release_logs_nothing_and_is_no_loss(threaded_engine: Engine, caplog):
    lost: list[EndReason] = []
    with caplog.at_level(logging.WARNING, logger="django_simba.engine"):
        with threaded_engine.lock("quiet", on_lost=lambda term, reason: lost.append(reason)):
            pass
        election = threaded_engine.election("quiet.leader")
        wait_until(lambda: election.is_leader, 5)
        election.close()
    assert loss_lines(caplog) == [] and lost == []


def test_on_lost_the_signal_and_the_metric_agree_when_the_engine_closes_under_a_held_lock(threaded_engine):
    """The three used to disagree on CLOSED: on_lost fired, the signal and the metric stayed silent."""
    from django_simba.engine import EngineObserver

    heard: list[str] = []

    class Losses(EngineObserver):
        def term_ended(self, kind, term, reason):
            if reason.is_loss:
                heard.append(f"observer {reason.value}")

    threaded_engine.observers = [*threaded_engine.observers, Losses()]
    on_lost = lambda term, reason: heard.append(f"on_lost {reason.value}")  # noqa: E731
    held = threaded_engine.lock("closing", on_lost=on_lost)
    held.acquire(5)
    threaded_engine.close()
    wait_until(lambda: len(heard) == 2, 5, message="both heard")
    assert sorted(heard) == ["observer engine closed", "on_lost engine closed"]


def _nothing(*args):
    return None


class Handler:
    def on_lost(self, term, reason):
        return None


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (lambda e: e.lock("shape", on_lost=lambda term: None), "on_lost(term, reason)"),
        (lambda e: e.semaphore("shape", 2, on_lost=lambda: None), "on_lost(term, reason)"),
        (lambda e: e.election("shape", on_elected=lambda: None), "on_elected(term)"),
        (lambda e: e.election("shape", on_revoked=lambda term, reason: None), "on_revoked(term)"),
        (lambda e: e.group("shape", on_change=lambda: None), "on_change(members)"),
        (lambda e: e.lock("shape", on_lost="not a function"), "on_lost(term, reason)"),
    ],
)
def test_a_callback_that_cannot_take_its_arguments_is_refused_when_handed_over(threaded_engine, make, shape):
    with pytest.raises(TypeError, match=shape.replace("(", r"\(").replace(")", r"\)")):
        make(threaded_engine)
    assert threaded_engine.lines.slots == {}  # refused before anything contended


@pytest.mark.parametrize(
    "callback",
    [
        lambda term, reason: None,
        lambda *args: None,
        _nothing,
        Handler().on_lost,
        functools.partial(_nothing, 1),
        print,
    ],
)
def test_callbacks_that_can_take_their_arguments_are_accepted(threaded_engine, callback):
    threaded_engine.lock("shape", on_lost=callback)
