"""Keeping client libraries' retry chatter out of the operator tools' output.

A command or a system check that cannot reach its backend says so once, with
the reason. Meanwhile the client library may log every attempt it made: kazoo
logs "Connection dropped" at WARNING for each retry, so ``simba_status`` on a
ZooKeeper that is down printed half a dozen such lines before its own error.
:func:`quiet_client_logs` drops those records while a tool runs, and counts
them; errors still pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

#: The loggers a client library logs its connection attempts to (kazoo logs to both, and the
#: ZooKeeper backend's kazoo clients to the last: there its warnings are DEBUG records already).
CLIENT_LOGGERS = ("kazoo.client", "kazoo.protocol.connection", "django_simba.backends.zookeeper.kazoo")


class RetryChatter(logging.Filter):
    """Drops records below ``level`` and counts them."""

    def __init__(self, level: int = logging.ERROR) -> None:
        super().__init__()
        self.level = level
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            self.dropped += 1
            return False
        return True


@contextmanager
def quiet_client_logs(names: Sequence[str] = CLIENT_LOGGERS) -> Iterator[RetryChatter]:
    """Drop the client libraries' warnings for the duration; yields the filter (its ``dropped`` count).

    A filter on a logger sees only the records logged to that very logger, so it
    is put on each logger the libraries use, not on a parent.
    """
    chatter = RetryChatter()
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addFilter(chatter)
    try:
        yield chatter
    finally:
        for logger in loggers:
            logger.removeFilter(chatter)
