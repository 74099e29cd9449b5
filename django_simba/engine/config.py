"""The engine's timing parameters, validated once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..spi import ConfigurationError, validate_metadata

DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_INTERVAL = 5.0
DEFAULT_DRIFT = 0.01
DEFAULT_PURGE_INTERVAL = 60.0


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How long a session lives without renewal, how often it is renewed, and clock drift.

    ``drift`` bounds the rate difference between the backend's clock and the
    local one: a term is trusted for ``remaining * (1 - drift)`` from the
    moment its request was sent.
    """

    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_interval: float = DEFAULT_RENEW_INTERVAL
    drift: float = DEFAULT_DRIFT
    purge_interval: float = DEFAULT_PURGE_INTERVAL
    #: Shown by status tools; a callable is evaluated at every session open (so a pid is current).
    metadata: str | Callable[[], str] = ""

    def __post_init__(self) -> None:
        for field in ("lease_duration", "renew_interval", "purge_interval"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(f"{field} must be a positive number of seconds, not {value!r}")
        if self.renew_interval > self.lease_duration / 2:
            raise ConfigurationError(
                f"renew_interval ({self.renew_interval}) must be at most half of "
                f"lease_duration ({self.lease_duration})"
            )
        if (
            isinstance(self.drift, bool)
            or not isinstance(self.drift, int | float)
            or not 0 <= self.drift < 0.5
        ):
            raise ConfigurationError(f"drift must be a fraction in [0, 0.5), not {self.drift!r}")
        if not callable(self.metadata):
            try:
                validate_metadata(self.metadata)
            except ValueError as error:
                raise ConfigurationError(str(error)) from error

    def session_metadata(self) -> str:
        return self.metadata() if callable(self.metadata) else self.metadata

    def trusted_until(self, sent_at: float, remaining: float) -> float:
        """The local deadline of a grant whose request was sent at ``sent_at``."""
        return sent_at + remaining * (1.0 - self.drift)
