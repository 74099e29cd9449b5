"""What runs in the fleet benchmark's worker processes: many sessions, or one pool under load.

Each worker process sets Django up on the one database it is given, then builds
one ``DatabaseBackend`` per session (as each process of a fleet has its own),
so every session has its own pool and, where the backend listens, its own
LISTEN connection.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

LEASE = 3.0
RENEW = 1.0
#: Sessions open with this lease, while the other processes open theirs; the first renewal sets LEASE.
OPENING_LEASE = 120.0
#: Each session acquires and releases a lock of its own this often.
CYCLE_EVERY = 0.5


def setup_django(database: dict[str, Any]) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="django-simba-fleet-benchmark",
        DATABASES={"default": database},
        INSTALLED_APPS=["django_simba"],
        SIMBA={"BACKEND": "memory", "AUTOSTART": False},
    )
    django.setup()


def build_backend(options: dict[str, Any]) -> Any:
    from django_simba.backends.database import AnyDatabaseBackend

    backend = AnyDatabaseBackend.build({"alias": "default", **options}, timeout=5.0)
    if backend.notifies:
        backend.subscribe(lambda event: None)  # as the engine does: the listener connects
    return backend


@dataclass
class Measured:
    """One session's measurements (seconds)."""

    cycles: list[float] = field(default_factory=list)
    renewals: list[float] = field(default_factory=list)
    errors: int = 0
    lost_sessions: int = 0


def _session(
    backend: Any, session: str, index: int, cycle_every: float, start: float, end: float
) -> Measured:
    from django_simba.spi import SessionExpired, SimbaError

    measured = Measured()
    name = f"fleet.{index}"
    rng = random.Random(index)
    while time.monotonic() < start:
        time.sleep(start - time.monotonic())
    next_renewal = start + rng.uniform(0, RENEW)
    next_cycle = start + rng.uniform(0, cycle_every)
    while (now := time.monotonic()) < end:
        try:
            if now >= next_renewal:
                next_renewal += RENEW
                backend.keep_alive(session, LEASE)
                measured.renewals.append(time.monotonic() - now)
            elif now >= next_cycle:
                next_cycle += cycle_every
                grant = backend.acquire(session, name)
                if grant is None:
                    measured.errors += 1
                else:
                    backend.release(session, name, grant.token)
                    measured.cycles.append(time.monotonic() - now)
            else:
                time.sleep(min(next_renewal, next_cycle, end) - now)
        except SessionExpired:
            measured.lost_sessions += 1
            session = backend.open_session(LEASE, f"fleet session {index}").session_id
        except SimbaError:
            measured.errors += 1
    backend.close_session(session)
    return measured


def run_sessions(
    database: dict[str, Any],
    options: dict[str, Any],
    first: int,
    count: int,
    cycle_every: float,
    ready: Any,
    go: Any,
    start_at: Any,
    results: Any,
) -> None:
    """``count`` sessions in threads: each renews every RENEW and cycles a lock of its own."""
    setup_django(database)
    backends = [build_backend(options) for _ in range(count)]
    sessions = [
        backend.open_session(OPENING_LEASE, f"fleet session {first + n}").session_id
        for n, backend in enumerate(backends)
    ]
    ready.wait()  # every session open (and listening) before the clock starts
    go.wait()
    start, end = start_at[0], start_at[1]
    measured: list[Measured] = []
    lock = threading.Lock()

    def session(index: int) -> None:
        one = _session(backends[index - first], sessions[index - first], index, cycle_every, start, end)
        with lock:
            measured.append(one)

    threads = [threading.Thread(target=session, args=(first + n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for backend in backends:
        backend.close()
    results.put(
        {
            "cycles": [value for one in measured for value in one.cycles],
            "renewals": [value for one in measured for value in one.renewals],
            "errors": sum(one.errors for one in measured),
            "lost_sessions": sum(one.lost_sessions for one in measured),
        }
    )


def pool_footprint(database: dict[str, Any], options: dict[str, Any], seconds: float, results: Any) -> None:
    """One process's connections: at rest after opening its session, and with 8 threads cycling locks."""
    setup_django(database)
    backend = build_backend(options)
    session = backend.open_session(OPENING_LEASE, "pool footprint").session_id
    listening = 1 if backend.notifies else 0
    if backend.notifies:
        deadline = time.monotonic() + 5
        while not backend.notifying and time.monotonic() < deadline:
            time.sleep(0.01)
    at_rest = backend.connection_count()
    stop = threading.Event()

    def cycle(n: int) -> None:
        while not stop.is_set():
            grant = backend.acquire(session, f"footprint.{n}")
            if grant is not None:
                backend.release(session, f"footprint.{n}", grant.token)

    threads = [threading.Thread(target=cycle, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, backend.connection_count())
        time.sleep(0.001)
    stop.set()
    for thread in threads:
        thread.join()
    backend.close_session(session)
    backend.close()
    results.put({"at_rest": at_rest, "peak": peak, "listening": listening})
