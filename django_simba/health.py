"""Moved to :mod:`django_simba.integrations.health_check`; this path keeps working.

``"django_simba.health.SimbaSession"`` in a ``HealthCheckView``'s checks names the same class.
"""

from .integrations.health_check import SimbaSession

__all__ = ["SimbaSession"]
