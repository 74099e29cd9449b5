"""The fenced register: the resource a leader writes to, guarded only by fencing tokens."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Write:
    """A write as it travels the network.

    ``token`` is all the register looks at. ``grant`` is the oracle's knowledge (the
    place of the writer's term in the backend's grant order), used only to judge.
    """

    name: str
    token: int
    grant: int
    writer: str


@dataclass(slots=True)
class _Cell:
    highest_token: int = 0
    newest_grant_seen: int = 0  # the newest term that ever reached the register, accepted or not
    accepted: int = 0
    rejected: int = 0


class FencedRegister:
    """One value per name; accepts a write whose token is >= the highest it accepted before.

    :meth:`receive` returns whether the write was accepted and whether accepting it
    was wrong: a write of a term older (in grant order) than a term whose write
    already reached the register is superseded, and fencing must refuse it.
    """

    def __init__(self) -> None:
        self._cells: dict[str, _Cell] = {}

    def receive(self, write: Write) -> tuple[bool, bool]:
        cell = self._cells.setdefault(write.name, _Cell())
        superseded = write.grant < cell.newest_grant_seen
        cell.newest_grant_seen = max(cell.newest_grant_seen, write.grant)
        if write.token < cell.highest_token:
            cell.rejected += 1
            return False, False
        cell.highest_token = write.token
        cell.accepted += 1
        return True, superseded

    def counts(self) -> tuple[int, int]:
        """(accepted, rejected) over every name."""
        return (sum(c.accepted for c in self._cells.values()), sum(c.rejected for c in self._cells.values()))
