"""Prometheus metrics of the engine, when ``prometheus_client`` is installed.

An :class:`~django_simba.engine.EngineObserver` that counts what the engine
does; the registry adds it to the process's engine (:func:`install_metrics`).
Expose them the usual way (``prometheus_client.start_http_server`` or
django-prometheus's ``/metrics`` view). Every metric has a ``backend`` label
(``sqlite``, ``postgresql``, ``redis``...); lease names are never labels, so
the number of series stays small whatever the application locks.

==================================  =========  ==========================================
metric                              type       meaning
==================================  =========  ==========================================
``simba_session_live``              gauge      1 while the process has a live session
``simba_sessions_opened_total``     counter    sessions opened (one per process, plus one
                                               after every loss)
``simba_sessions_lost_total``       counter    sessions lost, by ``reason`` (session
                                               expired, deadline passed)
``simba_keepalive_seconds``         histogram  keep-alive round trips
``simba_keepalive_failures_total``  counter    keep-alives that failed, timed out or
                                               answered later than the renew interval
``simba_terms_won_total``           counter    terms won, by ``kind`` (lock, semaphore,
                                               election)
``simba_terms_lost_total``          counter    terms lost (``EndReason.is_loss``: every end
                                               but the holder's release), by ``kind`` and
                                               ``reason``
``simba_terms_held``                gauge      terms held now, by ``kind``
==================================  =========  ==========================================
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from ..engine import EndReason, Engine, EngineObserver, Term

KEEPALIVE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def available() -> bool:
    """True when ``prometheus_client`` can be imported."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class EngineMetrics:
    """The metric families, registered once per Prometheus registry."""

    session_live: Any
    sessions_opened: Any
    sessions_lost: Any
    keepalive_seconds: Any
    keepalive_failures: Any
    terms_won: Any
    terms_lost: Any
    terms_held: Any


# Keyed by the registry itself, weakly: an id() could be reused by a later registry once the
# first is collected, which would hand it metrics registered on the dead one.
_families: weakref.WeakKeyDictionary[Any, EngineMetrics] = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()


def metrics_for(registry: Any = None) -> EngineMetrics:
    """The metric families on ``registry`` (default: prometheus_client's global one)."""
    import prometheus_client as prom

    registry = prom.REGISTRY if registry is None else registry
    with _families_lock:
        families = _families.get(registry)
        if families is None:
            families = _families[registry] = EngineMetrics(
                session_live=prom.Gauge(
                    "simba_session_live",
                    "1 while this process has a live Simba session.",
                    ["backend"],
                    registry=registry,
                    multiprocess_mode="livesum",
                ),
                sessions_opened=prom.Counter(
                    "simba_sessions_opened", "Simba sessions opened.", ["backend"], registry=registry
                ),
                sessions_lost=prom.Counter(
                    "simba_sessions_lost",
                    "Simba sessions lost (expired on the backend, or past their local deadline).",
                    ["backend", "reason"],
                    registry=registry,
                ),
                keepalive_seconds=prom.Histogram(
                    "simba_keepalive_seconds",
                    "Round trip of each Simba session keep-alive.",
                    ["backend"],
                    buckets=KEEPALIVE_BUCKETS,
                    registry=registry,
                ),
                keepalive_failures=prom.Counter(
                    "simba_keepalive_failures",
                    "Simba keep-alives that failed, timed out or came back after the renew interval.",
                    ["backend"],
                    registry=registry,
                ),
                terms_won=prom.Counter(
                    "simba_terms_won",
                    "Lease terms won, by locks and elections.",
                    ["backend", "kind"],
                    registry=registry,
                ),
                terms_lost=prom.Counter(
                    "simba_terms_lost",
                    "Lease terms lost: every end but the holder's release (taken over, expired, closed...).",
                    ["backend", "kind", "reason"],
                    registry=registry,
                ),
                terms_held=prom.Gauge(
                    "simba_terms_held",
                    "Lease terms held by this process now.",
                    ["backend", "kind"],
                    registry=registry,
                    multiprocess_mode="livesum",
                ),
            )
    return families


class PrometheusObserver(EngineObserver):
    """Feeds :class:`EngineMetrics` from one engine's hooks.

    They only count, so they run inline: in the thread that changed the engine's state, at
    no cost of a thread switch at every grant and end.
    """

    inline = True

    def __init__(self, backend: str, metrics: EngineMetrics | None = None) -> None:
        self.backend = backend
        self.metrics = metrics or metrics_for()
        # The series of each kind, looked up once: ``labels()`` costs more than the count itself.
        self._series: dict[str, tuple[Any, Any]] = {}

    def _won_and_held(self, kind: str) -> tuple[Any, Any]:
        series = self._series.get(kind)
        if series is None:
            metrics, backend = self.metrics, self.backend
            won, held = metrics.terms_won.labels(backend, kind), metrics.terms_held.labels(backend, kind)
            series = self._series[kind] = (won, held)
        return series

    def session_opened(self, session_id: str) -> None:
        self.metrics.sessions_opened.labels(self.backend).inc()
        self.metrics.session_live.labels(self.backend).set(1)

    def session_lost(self, session_id: str, reason: EndReason) -> None:
        self.metrics.sessions_lost.labels(self.backend, reason.value).inc()
        self.metrics.session_live.labels(self.backend).set(0)

    def keep_alive_done(self, seconds: float, ok: bool) -> None:
        self.metrics.keepalive_seconds.labels(self.backend).observe(seconds)
        if not ok:
            self.metrics.keepalive_failures.labels(self.backend).inc()

    def term_started(self, kind: str, term: Term) -> None:
        won, held = self._won_and_held(kind)
        won.inc()
        held.inc()

    def term_ended(self, kind: str, term: Term, reason: EndReason) -> None:
        self._won_and_held(kind)[1].dec()
        if reason.is_loss:
            self.metrics.terms_lost.labels(self.backend, kind, reason.value).inc()


def install_metrics(engine: Engine, registry: Any = None) -> bool:
    """Add a :class:`PrometheusObserver` to ``engine`` (once); False when prometheus_client is missing."""
    if not available():
        return False
    if any(isinstance(observer, PrometheusObserver) for observer in engine.observers):
        return True
    engine.observers.append(PrometheusObserver(engine.backend.vendor, metrics_for(registry)))
    return True
