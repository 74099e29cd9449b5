"""The process's engine, built from ``settings.SIMBA`` on first use.

One engine per process: every lock, election and group of the process shares
its one session. ``reset()`` closes it (tests; ``SIMBA`` changed).

The registry imports nothing of the servers, signals or metrics: it is handed,
by the app's configuration (:func:`django_simba.servers.wiring.compose`), what
to do to every engine it builds (:func:`configure`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from .conf import SimbaSettings, default_metadata, get_settings, load_backend_class
from .engine import Engine, EngineConfig
from .spi import LeaseBackend
from .spi.floor import with_token_floor

logger = logging.getLogger("django_simba")

#: Done to every engine the registry builds, in order, before anyone gets it.
EngineSetup = Callable[[Engine], object]

_engine: Engine | None = None
_setup: tuple[EngineSetup, ...] = ()
_lock = threading.Lock()


def configure(setup: Sequence[EngineSetup]) -> None:
    """What to do to every engine built from now on: hold where the process does not serve, send
    the signals, feed the metrics (idempotent: the same steps replace the ones before)."""
    global _setup
    _setup = tuple(setup)


def build_backend(settings: SimbaSettings) -> LeaseBackend:
    """The configured backend, its tokens lifted by ``TOKEN_FLOOR`` (for the engine and the tools alike)."""
    backend_class = load_backend_class(settings.backend)
    return with_token_floor(
        backend_class.build(settings.options, timeout=settings.timeout), settings.token_floor
    )


def build_engine(settings: SimbaSettings | None = None) -> Engine:
    settings = settings or get_settings()
    config = EngineConfig(
        lease_duration=settings.lease_duration,
        renew_interval=settings.renew_interval,
        drift=settings.drift,
        purge_interval=settings.purge_interval,
        metadata=settings.metadata if settings.metadata is not None else default_metadata,
    )
    engine = Engine(build_backend(settings), config)
    for step in _setup:
        step(engine)
    return engine


def get_engine() -> Engine:
    """The process's engine (built, not started: it starts on first use or by AUTOSTART)."""
    global _engine
    engine = _engine
    if engine is None or engine.closed:
        with _lock:
            if _engine is None or _engine.closed:
                _engine = build_engine()
            engine = _engine
    return engine


def peek_engine() -> Engine | None:
    """The engine if one was built, without building it."""
    return _engine


def reset() -> None:
    """Close the process's engine; the next use builds a new one from the current settings."""
    global _engine
    with _lock:
        engine, _engine = _engine, None
    if engine is None:
        return
    if engine.started:
        engine.close()
    else:
        engine.backend.close()  # built but never started: it may still hold connections
