"""A child process's settings with ``LOGGING`` as a user writes it: django-simba's records on stderr.

``SIMBA`` comes as JSON in ``SIMBA_CHILD_SIMBA`` (``process_settings``).
"""

from tests.django.process_settings import *  # noqa: F403

LOGGING = {
    "version": 1,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"django_simba": {"handlers": ["console"], "level": "INFO"}},
}
