"""The engine's timing parameters, validated once, and the bounds of every span of seconds.

:data:`MAX_SECONDS` and :func:`seconds_problem` are the one place the bounds live: the
engine's calls (:func:`check_seconds`), :class:`EngineConfig` and the Django settings checks
all use them, so a value is refused where it is given, with the same range in every message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..spi import ConfigurationError, validate_metadata
from ..spi.backend import MAX_SECONDS

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
            problem = seconds_problem(field, getattr(self, field), allow_zero=False, allow_none=False)
            if problem is not None:
                raise ConfigurationError(problem)
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


def seconds_range(*, allow_zero: bool = True, allow_none: bool = True) -> str:
    """The accepted spans of seconds, in words (the end of every message that refuses one)."""
    low = "from 0" if allow_zero else "more than 0 and"
    text = f"a number of seconds {low} up to {MAX_SECONDS:.0f} (365 days)"
    return f"None (no limit) or {text}" if allow_none else text


def seconds_problem(
    field: str, value: object, *, allow_zero: bool = True, allow_none: bool = True
) -> str | None:
    """Why ``value`` is no span of seconds ``field`` accepts (nan, a negative, past a year...), or None.

    ``allow_none``: ``None`` means no limit, and so does an infinity. A bool is no number.
    """
    if value is None or (allow_none and value == math.inf):
        return None if allow_none else f"{field} must be {seconds_range(allow_none=False)}, not None"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{field} must be {seconds_range(allow_zero=allow_zero, allow_none=allow_none)}, not {value!r}"
    low_ok = value >= 0 if allow_zero else value > 0
    if low_ok and value <= MAX_SECONDS:  # False for nan
        return None
    return f"{field} must be {seconds_range(allow_zero=allow_zero, allow_none=allow_none)}, not {value!r}"


def check_seconds(field: str, value: object, *, allow_zero: bool = True) -> float | None:
    """A caller's span of seconds (``None``: no limit), or ValueError (TypeError: not a number).

    An infinity means no limit, as ``None`` does, and is returned as ``None``.
    """
    if value is None:
        return None
    if type(value) is float or type(value) is int:  # the common case, at every acquire: one test
        low = value >= 0 if allow_zero else value > 0
        if low and value <= MAX_SECONDS:
            return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field} must be {seconds_range(allow_zero=allow_zero)}, not {value!r}")
    problem = seconds_problem(field, value, allow_zero=allow_zero)
    if problem is not None:
        raise ValueError(problem)
    return None if value == math.inf else value


__all__ = [
    "DEFAULT_DRIFT",
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_PURGE_INTERVAL",
    "DEFAULT_RENEW_INTERVAL",
    "MAX_SECONDS",
    "EngineConfig",
    "check_seconds",
    "seconds_problem",
    "seconds_range",
]
