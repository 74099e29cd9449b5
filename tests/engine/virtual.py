"""Several virtual runtimes (a process each) driven as one world on one clock."""

from __future__ import annotations

from django_simba.testing.runtime import VirtualRuntime


class Shared:
    """Drive several virtual runtimes as one world on one clock."""

    def __init__(self, *runtimes: VirtualRuntime) -> None:
        self.runtimes = runtimes

    def now(self) -> float:
        return max(r.clock for r in self.runtimes)

    def _next(self):
        pending = [(r._events[0][0], i) for i, r in enumerate(self.runtimes) if r._events]
        return min(pending) if pending else None

    def step(self) -> bool:
        nxt = self._next()
        if nxt is None:
            return False
        when, index = nxt
        for r in self.runtimes:
            r.clock = max(r.clock, when)
        return self.runtimes[index].step()

    def advance(self, seconds: float) -> None:
        until = self.now() + seconds
        while (nxt := self._next()) is not None and nxt[0] <= until:
            self.step()
        for r in self.runtimes:
            r.clock = max(r.clock, until)

    def run_until_true(self, condition, limit: float) -> float:
        start = self.now()
        while not condition():
            nxt = self._next()
            if nxt is None or nxt[0] > start + limit:
                raise AssertionError(f"condition not met within {limit} virtual seconds")
            self.step()
        return self.now() - start
