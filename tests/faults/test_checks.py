"""The judge of the real-fault tests catches each violation it is meant to catch.

Events and register histories are written by hand here, so each check is seen
failing on exactly the fault it names (no server needed).
"""

from __future__ import annotations

from typing import Any

from tests.faults.checks import verify
from tests.faults.register import Attempt


def acquired(worker: str, token: int, at: float, *, valid: bool = True) -> dict[str, Any]:
    return {"e": "acquired", "w": worker, "token": token, "t": at, "at": at, "valid": valid}


def write(worker: str, token: int, checked: float, *, accepted: bool, valid: bool = True) -> dict[str, Any]:
    return {
        "e": "write",
        "w": worker,
        "token": token,
        "t": checked + 0.001,
        "checked": checked,
        "valid": valid,
        "late": not valid,
        "accepted": accepted,
    }


def history(*rows: tuple[str, int, bool]) -> list[Attempt]:
    attempts, seq = [], 0
    for number, (writer, token, accepted) in enumerate(rows, 1):
        seq += accepted
        attempts.append(Attempt(number, token, writer, False, accepted, seq if accepted else None))
    return attempts


def test_a_clean_hand_over_passes() -> None:
    events = [
        acquired("w1", 1, 0.0),
        write("w1", 1, 0.1, accepted=True),
        acquired("w2", 2, 1.0),
        write("w2", 2, 1.1, accepted=True),
        write("w1", 1, 1.2, accepted=False, valid=False),  # a late write, refused
    ]
    verdict = verify(events, history(("w1", 1, True), ("w2", 2, True), ("w1", 1, False)))
    assert verdict.violations == []
    assert (verdict.terms, verdict.accepted, verdict.refused) == (2, 2, 1)


def test_two_holders_at_once_are_caught() -> None:
    events = [
        acquired("w1", 1, 0.0),
        acquired("w2", 2, 1.0),
        write("w1", 1, 1.5, accepted=False),  # w1 still believed in token 1 after w2 got token 2
    ]
    verdict = verify(events, history(("w1", 1, False)))
    assert any("believed token 1 valid" in v for v in verdict.violations), verdict.violations


def test_an_overlap_within_the_grace_of_a_revoked_term_is_excused() -> None:
    events = [acquired("w1", 1, 0.0), acquired("w2", 2, 1.0), write("w1", 1, 1.3, accepted=False)]
    assert verify(events, history(("w1", 1, False)), revoked={("w1", 1): (1.0, 0.5)}).violations == []
    late = verify(events, history(("w1", 1, False)), revoked={("w1", 1): (1.0, 0.2)})
    assert late.violations


def test_a_token_that_goes_back_is_caught() -> None:
    events = [acquired("w1", 5, 0.0), acquired("w2", 1, 1.0)]  # e.g. the backend lost its data
    verdict = verify(events, [])
    assert any("token went back" in v for v in verdict.violations), verdict.violations


def test_a_token_given_to_two_workers_is_caught() -> None:
    verdict = verify([acquired("w1", 3, 0.0), acquired("w2", 3, 5.0)], [])
    assert any("token 3 granted to" in v for v in verdict.violations), verdict.violations


def test_a_stale_write_accepted_by_the_register_is_caught() -> None:
    events = [acquired("w1", 1, 0.0), acquired("w2", 2, 1.0)]
    stored = history(("w2", 2, True), ("w1", 1, True))  # a register that does not fence
    verdict = verify(events, stored)
    assert any("stale write accepted" in v for v in verdict.violations), verdict.violations


def test_writes_the_logs_and_the_register_disagree_on_are_caught() -> None:
    events = [acquired("w1", 1, 0.0), write("w1", 1, 0.1, accepted=True)]
    verdict = verify(events, history(("w1", 1, False)))
    assert any("w1: 1 accepted writes logged, 0 in the register" in v for v in verdict.violations)
    # an accepted write of a term nobody logged
    assert verify([], history(("w9", 7, True))).violations


def test_a_killed_worker_may_leave_one_unlogged_write() -> None:
    events = [acquired("w1", 1, 0.0), write("w1", 1, 0.1, accepted=True)]
    stored = history(("w1", 1, True), ("w1", 1, True))
    assert verify(events, stored, killed={"w1"}).violations == []
    assert verify(events, stored).violations


def test_an_owner_the_backend_does_not_confirm_is_caught() -> None:
    event = {**acquired("w1", 4, 0.0), "pid": 11, "valid_after_owner": True}
    assert verify([{**event, "owner": {"token": 4, "pid": 11}}], []).violations == []
    assert verify([{**event, "owner": {"error": "BackendUnavailable: down"}}], []).violations == []
    wrong = verify([{**event, "owner": {"token": 3, "pid": 12}}], [])
    assert any("owner() said pid 12 holds token 3" in v for v in wrong.violations), wrong.violations


def test_a_silent_worker_is_caught_unless_it_was_paused() -> None:
    events = [acquired("w1", 1, 0.0), {"e": "waiting", "w": "w1", "t": 8.0}]
    assert any("logged nothing" in v for v in verify(events, []).violations)
    assert verify(events, [], paused={"w1": (0.5, 7.0)}).violations == []
