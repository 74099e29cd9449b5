"""What a lock or semaphore object holds: one acquisition per caller, in the process that made it.

A handle may be shared by many callers (threads, tasks). Each caller sees and releases only
its own acquisition (design: Handles): a caller whose term ended learns it from its own
release, however the handle was granted since, and nobody's release touches another
caller's term. Waiting is never done here: the engine's line for the name serialises the
local contenders, so a handle needs no lock of its own and holds none across a caller's
block (one that a fork could copy locked, or that would make a granted caller wait on
another's block past its own timeout).

An acquisition records the process it was made in: in a forked child, the parent's are
nobody's (the child acquires afresh), and releasing one reports it ``forked``.

Every operation is one dict operation, atomic under the GIL. Only the caller itself adds or
removes its entry; a release by term (from any thread) claims the acquisition instead
(:meth:`~.lock.Acquisition.take_release`), and the owner's entry is dropped at its next use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .lock import Acquisition
    from .term import Term


class Holdings(dict[object, "Acquisition"]):
    """The acquisitions held through one handle, by caller: ``holdings[caller] = acquisition``
    once granted (anything it held before was given back, or inherited from a parent).

    A dict, so that ``in`` and that assignment cost no Python call at every acquisition.
    """

    __slots__ = ()

    def of(self, caller: object, pid_of: Callable[[], int]) -> Acquisition | None:
        """What ``caller`` holds through the handle in this process (``pid_of()``: its id)."""
        held = self.get(caller)
        if held is None or held.release_taken or held.pid != pid_of():  # the pid only if needed
            return None
        return held

    def take(self, caller: object) -> Acquisition | None:
        """Stop holding what ``caller`` holds (made here or in a parent process), to release it."""
        held = self.pop(caller, None)
        return held if held is not None and held.take_release() else None

    def take_term(self, term: Term) -> Acquisition | None:
        """Stop holding the acquisition of ``term``, whoever holds it, to release it."""
        for held in self._values():
            if held.term is term:
                return held if held.take_release() else None
        return None

    def terms(self, pid: int) -> list[Term]:
        """The terms held through the handle in process ``pid``, by every caller."""
        return [
            held.term
            for held in self._values()
            if held.pid == pid and held.term is not None and not held.release_taken
        ]

    def others(self, caller: object, pid: int) -> bool:
        """Whether another caller holds something through the handle in process ``pid``."""
        return any(
            key is not caller and held.pid == pid and not held.release_taken for key, held in self._items()
        )

    def _values(self) -> list[Acquisition]:
        return [held for _, held in self._items()]

    def _items(self) -> list[tuple[object, Acquisition]]:
        # Another caller may add or drop its entry meanwhile: copying is atomic, iterating is not.
        while True:
            try:
                return list(self.copy().items())
            except RuntimeError:  # changed during the copy (a finaliser ran another thread)
                continue
