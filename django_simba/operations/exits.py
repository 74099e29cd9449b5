"""How the commands turn library errors into exit codes (documented in docs/commands.rst), and keep
client libraries' retry chatter out of their output."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from django.core.management.base import CommandError

from ..spi import BackendUnavailable, ConfigurationError, InvalidName, redact
from .lognoise import quiet_client_logs

#: The backend could not be reached (or did not answer in time).
UNREACHABLE = 2


@contextmanager
def command_errors() -> Iterator[None]:
    """Exit 1 for bad names and settings, 2 when the backend cannot be reached; always with the reason."""
    try:
        yield
    except InvalidName as error:
        raise CommandError(str(error)) from error
    except ConfigurationError as error:
        raise CommandError(f"invalid Simba configuration: {redact(error)}") from error
    except BackendUnavailable as error:
        message = f"the Simba backend cannot be reached: {redact(error)}"
        raise CommandError(message, returncode=UNREACHABLE) from error


def client_logs(verbosity: int) -> AbstractContextManager[object]:
    """Client libraries' retry warnings are dropped (the command says why it failed) unless ``-v 2``."""
    return quiet_client_logs() if verbosity < 2 else nullcontext()
