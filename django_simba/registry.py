"""The process's engine, built from ``settings.SIMBA`` on first use.

One engine per process: every lock, election and group of the process shares
its one session. ``reset()`` closes it (tests; ``SIMBA`` changed).
"""

from __future__ import annotations

import logging
import threading

from .conf import SimbaSettings, default_metadata, get_settings, load_backend_class
from .engine import Engine, EngineConfig
from .spi import LeaseBackend

logger = logging.getLogger("django_simba")

_engine: Engine | None = None
_lock = threading.Lock()


def build_backend(settings: SimbaSettings) -> LeaseBackend:
    backend_class = load_backend_class(settings.backend)
    return backend_class(settings.options, timeout=settings.timeout)


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
    from .integrations import serving

    serving.apply(engine, settings.prefork_parent)  # a process that does not serve holds nothing
    from .signals import SignalObserver

    engine.observers.append(SignalObserver())
    from .integrations.prometheus import install_metrics

    install_metrics(engine)  # no-op without prometheus-client
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
