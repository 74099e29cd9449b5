"""What a session learns of a term whose release failed (``answers.py``), which does no I/O."""

from __future__ import annotations

from django_simba.backends.zookeeper.answers import ANSWERS_KEPT, ReleaseAnswers

PATH = "/simba/leases/x/s-0000000001"


def test_a_first_release_is_answered_by_its_own_delete() -> None:
    answers = ReleaseAnswers()
    assert answers.held_after(PATH, removed=True) is True
    assert answers.held_after(PATH, removed=False) is False  # found no node: force-released
    assert answers.held_after_release("x", 101) is False  # nothing of that term here: freed before


def test_a_late_reply_of_the_failed_delete_decides() -> None:
    removed, gone = ReleaseAnswers(), ReleaseAnswers()
    for answers in (removed, gone):
        answers.failed(PATH, "x", 101)
    removed.answered(PATH, removed=True, first=True)
    gone.answered(PATH, removed=False, first=True)
    # asked again, the delete finds no node either way: what the first one said decides
    assert removed.held_after(PATH, removed=False) is True
    assert gone.held_after(PATH, removed=False) is False


def test_no_node_after_a_delete_whose_reply_was_lost_is_unknown_never_a_loss() -> None:
    answers = ReleaseAnswers()
    answers.failed(PATH, "x", 101)
    answers.answered(PATH, removed=False, first=False)  # a resend: the lost first one may have applied
    assert answers.held_after(PATH, removed=False) is None
    assert answers.held_after(PATH, removed=False) is False  # reported once


def test_a_resend_that_removed_the_node_says_held() -> None:
    answers = ReleaseAnswers()
    answers.failed(PATH, "x", 101)
    answers.answered(PATH, removed=True, first=False)  # a keep-alive's resend removed it
    assert answers.held_after_release("x", 102) is False  # another term of the name
    assert answers.held_after_release("x", 101) is True  # settled since: nothing left to delete
    assert answers.held_after_release("x", None) is False


def test_only_the_latest_failed_releases_are_kept() -> None:
    answers = ReleaseAnswers()
    for number in range(ANSWERS_KEPT + 1):
        answers.failed(f"{PATH}{number}", "x", number + 1)
    assert not answers.tracks(f"{PATH}0") and answers.tracks(f"{PATH}{ANSWERS_KEPT}")
