"""Counting semaphores: at most ``permits`` holders of a name at once, each with a term of its own.

A semaphore of N permits on ``name`` is N ordinary leases, ``name:1`` to ``name:N``; to hold
the semaphore is to hold one of them. Every permit therefore keeps every rule of a lease on
every backend, with no backend change: a token > 0 that strictly increases with each term of
that permit, freed when its session dies, renewed by the session's one keep-alive. A
holder's :class:`~.term.Term` is the permit's: ``term.name`` is the permit's lease name, and
its token compares only with tokens of that permit.

An acquisition claims every permit at once (one contender per permit, in each permit's
line, all reporting to one acquisition): the first permit granted is its term, and every
later offer is declined, so the engine hands that permit to the next waiter here or frees
it (on a backend that hands names over, to the next session in the backend's line). It
tries the permits from a random one on, so acquirers spread over them.

Like a lock, a semaphore is **not re-entrant**: a thread (or task) that acquires a
semaphore object it already holds a permit of gets :class:`LockHeld`. Unlike a lock, one
object serves many holders at once. Its holdings are a lock's (:mod:`.holdings`, one
mechanism for both): each thread or task that acquires it holds a permit of its own,
``release()`` gives back the caller's (``release(term)`` gives back that permit, from any
thread), and a forked child holds none of its parent's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidName
from ..spi import MAX_NAME_LENGTH, LeaseInfo, validate_name
from .alock import LoopAcquirer
from .lock import Acquisition, Claim, LockBase, ThreadAcquirer
from .term import EndReason, Term
from .waiters import on_lane

if TYPE_CHECKING:
    from .port import Port
    from .waiters import Waiter

#: A waiting acquisition contends for every permit (on a polled backend it polls each), so its
#: cost grows with the number of permits: beyond this, use a queue or shard the work.
MAX_PERMITS = 100


def permit_names(name: str, permits: int) -> tuple[str, ...]:
    """The lease names of the permits of semaphore ``name``: ``name:1`` to ``name:{permits}``.

    Rejects, before any I/O, a count that is not an int from 1 to :data:`MAX_PERMITS`, and a
    name that leaves no room for the longest permit's suffix within the 128 characters of a name.
    """
    validate_name(name)
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError(f"permits must be an int, not {permits!r}")
    if not 1 <= permits <= MAX_PERMITS:
        raise ValueError(f"permits must be from 1 to {MAX_PERMITS}, not {permits!r}")
    room = MAX_NAME_LENGTH - len(f":{permits}")
    if len(name) > room:
        raise InvalidName(
            name,
            f"a semaphore of {permits} permits may have a name of at most {room} characters"
            f" (its permits are leases named '<name>:1' to '<name>:{permits}')",
        )
    return tuple(f"{name}:{number}" for number in range(1, permits + 1))


class PermitRequest(Acquisition):
    """A semaphore's acquisition: a claim on each permit; the first one granted is its term."""

    def __init__(
        self, semaphore: SemaphoreBase, names: Sequence[str], *, waits: bool, waiter: Waiter | None = None
    ) -> None:
        super().__init__(semaphore, waits=waits, waiter=waiter)
        self._claims = tuple(Claim(self, name) for name in names)

    @property
    def claims(self) -> Sequence[Claim]:
        return self._claims


class SemaphoreBase(LockBase):
    """What a semaphore is whoever waits for it: its permits, and a holder per thread or task."""

    kind = "semaphore"

    def __init__(
        self,
        port: Port | Callable[[], Port],
        name: str,
        permits: int,
        *,
        timeout: float | None = None,
        max_hold: float | None = None,
        on_lost: Callable[[Term, EndReason], Any] | None = None,
    ) -> None:
        self.permit_names = permit_names(name, permits)
        super().__init__(port, name, timeout=timeout, max_hold=max_hold, on_lost=on_lost)
        self.permits = permits

    def _holders_seen(self, port: Port) -> list[LeaseInfo]:
        number = {name: index for index, name in enumerate(self.permit_names)}
        seen = [info for info in port.leases(f"{self.name}:") if info.name in number]
        return sorted(seen, key=lambda info: number[info.name])  # name:2 before name:10

    def _request(self, port: Port, *, waits: bool, waiter: Waiter | None = None) -> Acquisition:
        names = self.permit_names
        start = port.runtime.random.randrange(len(names))
        return PermitRequest(self, names[start:] + names[:start], waits=waits, waiter=waiter)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} permits={self.permits} held here={len(self.terms)}>"


class Semaphore(SemaphoreBase, ThreadAcquirer):
    """At most ``permits`` holders of ``name`` at once, for threads (see the module docstring).

    ``timeout``, ``max_hold`` and ``on_lost`` mean what they mean for a :class:`~.lock.Lock`,
    for each holder's permit; so does :meth:`release`, for the permit's term.
    """

    def holders(self) -> list[LeaseInfo]:
        """Who holds the permits now, as the backend sees it (one backend call), in permit order."""
        return self._holders_seen(self.port)


class AsyncSemaphore(SemaphoreBase, LoopAcquirer):
    """The same semaphore for coroutines: a waiting task holds no thread (``async with``)."""

    async def holders(self) -> list[LeaseInfo]:
        """Who holds the permits now (one backend call, on the engine's lane), in permit order."""
        port = self.port
        return await on_lane(port, lambda: self._holders_seen(port))
