"""What a process that does not serve keeps for the processes that do.

A pre-fork parent (gunicorn's master with ``--preload``, Celery's prefork main
process) and the autoreloader's watcher load the application but serve nothing.
Their engine holds no session for elections: a candidacy begun there waits in the
:class:`ForkHold`, and every child forked from the process contends with it (the
parent keeps it waiting for the next child). Locks and groups used there still
open a session: the caller asked for one.

Which processes hold is decided outside the engine (``django_simba.servers``);
the engine only asks, in a forked child, whether that child serves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .contender import Contender
    from .engine import Engine


def _always() -> bool:
    return True


class ForkHold:
    """Candidacies and the start of the engine, kept for forked children (mutex of the engine held)."""

    def __init__(self) -> None:
        self.active = False
        #: Start the engine in every child that serves, even with no candidacy waiting (AUTOSTART).
        self.start_in_child = False
        #: Asked in a forked child: False keeps holding there (a fork that only daemonizes the parent).
        self.child_serves: Callable[[], bool] = _always
        self._parked: list[Contender] = []

    def park(self, candidate: Contender) -> bool:
        """Keep ``candidate`` for the children instead of contending here; False when not holding."""
        if not self.active:
            return False
        self._parked = [c for c in self._parked if c.contends_after_fork()] + [candidate]
        return True

    def take(self) -> tuple[list[Contender], bool]:
        """Stop holding: the candidacies still open, and whether the engine must start."""
        parked, start = [c for c in self._parked if c.contends_after_fork()], self.start_in_child
        self.active, self.start_in_child, self._parked = False, False, []
        return parked, start

    def take_in_child(self) -> tuple[list[Contender], bool]:
        """In a forked child: what it takes over, unless it does not serve either."""
        if not self.active or not self.child_serves():
            return [], False
        return self.take()


def hold_for_children(engine: Engine, *, start_in_child: bool = False) -> None:
    """Make ``engine`` hold from now on (idempotent); ``start_in_child`` carries AUTOSTART over."""
    with engine.mutex:
        hold = engine.fork_hold
        hold.active = True
        hold.start_in_child = hold.start_in_child or start_in_child


def serve_here(engine: Engine) -> None:
    """This process serves after all: start what was held, here."""
    with engine.mutex:
        parked, start = engine.fork_hold.take()
    if not (parked or start) or engine.closed:
        return
    engine.start()
    with engine.mutex:
        for candidate in parked:
            candidate.on_forked()  # held until now: it contends afresh, here
            engine.enqueue(candidate)
