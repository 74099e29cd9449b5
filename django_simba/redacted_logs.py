"""Every record of django-simba's loggers leaves masked: its message with its arguments, its traceback.

Messages are masked where they are made (:func:`django_simba.spi.redact`), but a traceback is
formatted later, by a handler, from the exception itself: a driver's error chained under one of
ours, or a callback's, may quote a URL or a DSN with its password. :class:`RedactSecrets` masks a
record before any handler sees it:

* its message, formatted with its arguments; when something was masked the record carries the
  masked text with no arguments (otherwise it is left as it came, template and arguments);
* its traceback, formatted once as text (``exc_text``, which every ``logging.Formatter`` prints
  as it is) and masked; ``exc_info`` is then cleared, so that no handler formats the exception
  again from the object (its message, or the local variables of its frames, as Django's error
  e-mails show them);
* its ``stack_info``.

It is a filter on each of the package's loggers (a logger's filters see only the records logged to
that very logger, not its children's, so a filter on ``django_simba`` alone would not do), added
when the package is imported. ``LOGGING`` (``dictConfig``) keeps the filters of a logger it
configures, and a logger runs its filters only for a record at or above its level: below it, a
call costs what it always did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

#: Every logger the package logs to (tests/django/test_log_redaction.py checks that none is missing).
LOGGERS = (
    "django_simba",
    "django_simba.admin",
    "django_simba.aio",
    "django_simba.engine",
    "django_simba.run",
    "django_simba.tasks",
    "django_simba.testing",
    "django_simba.backends.database.backend",
    "django_simba.backends.database.listener",
    "django_simba.backends.database.pool",
    "django_simba.backends.database.postgresql",
    "django_simba.backends.database.watchdog",
    "django_simba.backends.redis",
    "django_simba.backends.zookeeper",
    "django_simba.backends.zookeeper.kazoo",
)

_formatter = logging.Formatter()
#: ``spi.redact``, imported at the first record: importing the package compiles no pattern.
_redact: Callable[[object], str] | None = None


def _load_redact() -> Callable[[object], str]:
    global _redact
    from .spi.redaction import redact

    _redact = redact
    return redact


class RedactSecrets(logging.Filter):
    """Masks the credentials of a record (message, arguments, traceback, stack); passes every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact = _redact or _load_redact()
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit: the handler would print them raw
            record.msg, record.args = redact(f"{record.msg} {record.args!r}"), ()
        else:
            masked = redact(message)
            if masked != message:
                record.msg, record.args = masked, ()
        if record.exc_info:
            record.exc_text = record.exc_text or _formatter.formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


REDACT_SECRETS = RedactSecrets()


def redact_records_of(*names: str) -> None:
    """Mask every record of the loggers ``names`` from now on (once per logger)."""
    for name in names:
        logger = logging.getLogger(name)
        if REDACT_SECRETS not in logger.filters:
            logger.addFilter(REDACT_SECRETS)
