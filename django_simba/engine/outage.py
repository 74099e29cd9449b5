"""The engine's outage lines: :class:`django_simba.spi.outage.Outage`, which the backends' listening
connections use too."""

from ..spi.outage import REMIND_EVERY, Outage

__all__ = ["REMIND_EVERY", "Outage"]
