"""Moved to :mod:`django_simba.integrations.prometheus`; this path keeps working."""

from .integrations.prometheus import (
    KEEPALIVE_BUCKETS,
    EngineMetrics,
    PrometheusObserver,
    available,
    install_metrics,
    metrics_for,
)

__all__ = [
    "KEEPALIVE_BUCKETS",
    "EngineMetrics",
    "PrometheusObserver",
    "available",
    "install_metrics",
    "metrics_for",
]
