"""A pre-fork parent holds nothing: its candidacies and its start go to the children it forks."""

from __future__ import annotations

from django_simba.engine import Engine
from django_simba.engine.prefork import hold_for_children, serve_here
from django_simba.testing import wait_until

from .forking import run_in_child


def test_a_holding_parent_opens_no_session_and_contends_for_nothing(threaded_engine: Engine):
    hold_for_children(threaded_engine, start_in_child=True)
    election = threaded_engine.election("prefork-parent")
    assert not threaded_engine.started and threaded_engine.session_id is None
    assert threaded_engine.backend.owner("prefork-parent") is None
    # Decided at once: it does not lead here (a leader-mode task there is skipped without waiting).
    assert election.held and election.wait_decided(0) and not election.is_leader


def test_the_forked_child_takes_the_candidacy_and_the_parent_keeps_it(threaded_engine: Engine):
    hold_for_children(threaded_engine)
    election = threaded_engine.election("prefork-child")

    def in_child() -> str:
        wait_until(lambda: election.is_leader, 5, message="the child leads")
        return f"{threaded_engine.session_id}|{threaded_engine.fork_hold.active}"

    child_session, child_holds = run_in_child(in_child).split("|")
    assert child_session not in ("", "None") and child_holds == "False"
    # The parent still holds, with the candidacy kept for the next child.
    assert threaded_engine.fork_hold.active and not threaded_engine.started
    assert "leads" in run_in_child(lambda: "leads" if election.wait_decided(5) else "waits")


def test_autostart_is_carried_to_the_child(threaded_engine: Engine):
    hold_for_children(threaded_engine, start_in_child=True)
    assert run_in_child(lambda: threaded_engine.wait_for_session(5)) not in ("", "None")
    assert not threaded_engine.started


def test_a_child_that_does_not_serve_keeps_holding(threaded_engine: Engine):
    hold_for_children(threaded_engine, start_in_child=True)
    threaded_engine.election("prefork-daemon")
    threaded_engine.fork_hold.child_serves = lambda: False  # e.g. a fork that only daemonizes
    state = run_in_child(lambda: (threaded_engine.started, threaded_engine.fork_hold.active))
    assert state == "(False, True)"


def test_a_closed_candidacy_is_not_handed_on(threaded_engine: Engine):
    hold_for_children(threaded_engine)
    threaded_engine.election("prefork-closed").close()
    assert run_in_child(lambda: threaded_engine.started) == "False"


def test_serve_here_starts_what_was_held(threaded_engine: Engine):
    hold_for_children(threaded_engine)
    election = threaded_engine.election("prefork-here")
    serve_here(threaded_engine)
    assert election.wait_decided(5) and election.is_leader
    assert not threaded_engine.fork_hold.active
    later = threaded_engine.election("prefork-later")  # no longer held: contends at once
    assert later.wait_decided(5) and later.is_leader
