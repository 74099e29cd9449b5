"""What one simulated run is made of: timings, size, and the premises it breaks on purpose."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Premise(Enum):
    """Faults no client can prevent. Each is off unless a run asks for it.

    The invariants are expected to break under each of them, and only under them.
    """

    #: The backend loses all its data (no persistence) and has none of the Redis scripts' rules for
    #: it (``forgetful.py``): tokens start again at 1, and new terms are granted at once.
    TOKEN_RESET = "token-reset"
    #: The backend's clock jumps forward by more than a lease: live sessions expire at once.
    CLOCK_STEP = "clock-step"
    #: The backend restarts and forgets its live sessions (tokens kept): breaks "design: Rules, sessions".
    SESSIONS_LOST = "sessions-lost"
    #: One process's clock runs slower than ``DRIFT`` allows.
    DRIFT_EXCEEDED = "drift-exceeded"
    #: An evicted session's leases end as soon as the backend next hears from it (its keep-alive),
    #: as Redis's keep-alive script frees them today, instead of lasting their own time.
    EVICTION_FREES_LEASES = "eviction-frees-leases"


class HandOver(Enum):
    """How the model backend ends a term (a run draws it from its seed unless told)."""

    NEVER = "never"  # a release frees the name for every contender (SQL backends, Redis Cluster)
    ON_RELEASE = "release"  # a release gives it to the first live waiter (Redis single node)
    ALWAYS = "always"  # every end of a term does, expiry included (ZooKeeper)


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    """One run. Every random choice derives from ``seed``; the rest is fixed here.

    Times are seconds. ``max_delay`` bounds a one-way network delay while the network
    is calm; faults go past it on purpose.
    """

    seed: int
    processes: int = 3
    names: tuple[str, ...] = ("alpha", "beta")  # elections
    lock_names: tuple[str, ...] = ("gamma",)  # locks, two local holders per process
    thread_shared: str = "delta"  # one Lock object per process, shared by its threads (sharing.py)
    task_shared: str = "epsilon"  # one AsyncLock object per process, shared by its tasks
    lease: float = 15.0
    renew: float = 5.0
    drift: float = 0.01
    duration: float = 120.0
    max_delay: float = 0.03
    write_interval: float = 2.0
    premises: frozenset[Premise] = field(default_factory=frozenset)
    #: None: drawn from the seed, each mode equally likely.
    hand_over: HandOver | None = None
    #: Fault kinds (``FaultKind`` values) this run never injects, to look at the others alone.
    without: frozenset[str] = field(default_factory=frozenset)
    #: The rules of the Redis scripts for a server that lost its data (``forgetful.py``); off only to
    #: show that the simulation catches what they prevent.
    redis_rules: bool = True
    trace_size: int = 40
    check_every_event: bool = False  # also after events that cannot change what anyone believes

    @property
    def all_names(self) -> tuple[str, ...]:
        return self.names + self.lock_names + (self.thread_shared, self.task_shared)

    @property
    def timeout(self) -> float:
        """Every backend call gives up after this long (the backend default: the renew interval)."""
        return self.renew

    @property
    def patient_timeout(self) -> float:
        """The timeout of a process that waits long enough to see replies arrive past its deadlines."""
        return 1.5 * self.lease

    @property
    def round_trip(self) -> float:
        """The longest calm round trip."""
        return 2 * self.max_delay

    @property
    def takeover_bound(self) -> float:
        """How soon after a leader crashes another process must lead, when nothing else goes wrong.

        The crashed session lives on the backend for ``lease`` after its last keep-alive
        was applied (one that was on the wire at the crash lands up to ``max_delay``
        later). A candidate retries every ``renew/2 + jitter`` with jitter up to
        ``renew/4``, timed on its own clock, which may run ``drift`` slow. Its winning
        attempt may wait behind one other call on its lane, then needs a round trip;
        the refusal before it needed one more: three round trips in all, which also
        cover the in-flight keep-alive.
        """
        retry = (self.renew / 2 + self.renew / 4) / (1 - self.drift)
        return self.lease + retry + 3 * self.round_trip

    @property
    def settle(self) -> float:
        """How long a fault's after-effects may last once it ended (a call on the wire, a reopen)."""
        return self.patient_timeout + self.renew

    @property
    def recovery_bound(self) -> float:
        """Once every fault has settled, each name has a leader again within this long.

        A session given up locally is reopened within 1.5 renew intervals of backoff
        (plus a timeout); the old holder's session then lasts up to a lease on the
        backend; a candidate retries within ``renew/2 + jitter``.
        """
        reopen = 1.5 * self.renew + self.timeout
        return self.lease + reopen + self.takeover_bound

    def replay_command(self) -> str:
        """The one command that replays this run with its trace."""
        parts = ["python -m django_simba.testing.simulation", f"--seed {self.seed}", "--trace"]
        defaults = SimulationConfig(seed=self.seed)
        for premise in sorted(self.premises, key=lambda p: p.value):
            parts.append(f"--premise {premise.value}")
        if self.hand_over is not None:
            parts.append(f"--hand-over {self.hand_over.value}")
        for kind in sorted(self.without):
            parts.append(f"--without {kind.replace(' ', '-')}")
        if not self.redis_rules:
            parts.append("--without-redis-rules")
        for option in ("processes", "lease", "renew", "drift", "duration"):
            value = getattr(self, option)
            if value != getattr(defaults, option):
                parts.append(f"--{option} {value}")
        if self.names != defaults.names:
            parts.append(f"--names {','.join(self.names)}")
        if self.lock_names != defaults.lock_names:
            parts.append(f"--lock-names {','.join(self.lock_names)}")
        return " ".join(parts)
