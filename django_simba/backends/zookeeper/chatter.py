"""kazoo's connection retries, logged at DEBUG under django-simba's logger instead of at WARNING.

kazoo logs a WARNING for every connection attempt that fails ("Connection dropped", "Transition to
CONNECTING"...), for each client: a 16 s outage wrote 142 of them for one engine. The outage is
told by the engine (once when it begins, once when the backend answers again, see
docs/observability.rst), so the backend's clients log to :data:`KAZOO_LOGGER`, a child of
``django_simba.backends.zookeeper``, where kazoo's WARNINGs count as DEBUG: shown only where that
logger is enabled for DEBUG. Its errors stay errors.
"""

from __future__ import annotations

import logging

#: The logger of the backend's kazoo clients (``KazooClient(logger=...)``).
KAZOO_LOGGER = logging.getLogger("django_simba.backends.zookeeper.kazoo")


class RetriesAtDebug(logging.Filter):
    """A WARNING of kazoo's becomes a DEBUG record, or none where DEBUG is not shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        if not KAZOO_LOGGER.isEnabledFor(logging.DEBUG):
            return False  # the logger's level let WARNING through: DEBUG would not have been
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


KAZOO_LOGGER.addFilter(RetriesAtDebug())
