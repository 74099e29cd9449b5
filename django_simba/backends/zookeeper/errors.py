"""Deadlines for kazoo calls, and kazoo's exceptions turned into the library's own.

Every call of the backend runs against one :class:`Deadline` (the backend's timeout), and every
wait on a kazoo result goes through :func:`wait`, so no raw kazoo exception reaches a caller.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from ...spi import BackendTimeout, BackendUnavailable, SimbaError


class Deadline:
    """A point on the monotonic clock after which a call gives up."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at


def wait(
    result: Any, deadline: Deadline, what: str, *, passthrough: tuple[type[BaseException], ...] = ()
) -> Any:
    """The value of a kazoo async result, or the library's exception after the deadline.

    ZooKeeper's own errors that callers handle (``NoNodeError``, ``NodeExistsError``...) pass
    through, and so do the ``passthrough`` types; connection, authorization and timeout failures
    are translated.
    """
    try:
        return result.get(timeout=deadline.left())
    except passthrough:
        raise
    except KazooTimeoutError as error:
        raise BackendTimeout(f"ZooKeeper did not answer {what} within {deadline.seconds:g} s") from error
    except (ConnectionLoss, ConnectionClosedError, OperationTimeoutError) as error:
        raise BackendUnavailable(f"ZooKeeper connection lost during {what}: {error!r}") from error
    except NoAuthError as error:
        raise BackendUnavailable(
            f"ZooKeeper refused {what} (NoAuth): the ACL of the node or its parent does not allow "
            "this client; check the 'auth' and 'acl' options"
        ) from error
    except AuthFailedError as error:
        raise BackendUnavailable(f"ZooKeeper rejected the credentials during {what}") from error


@contextlib.contextmanager
def kazoo_errors(what: str) -> Iterator[None]:
    """Let no kazoo exception escape the block: each becomes the library's exception."""
    try:
        yield
    except KazooException as error:
        raise translate(error, what) from error


def translate(error: BaseException, what: str) -> SimbaError:
    """A kazoo exception that escaped :func:`wait` as the library's exception."""
    if isinstance(error, SimbaError):
        return error
    if isinstance(error, KazooTimeoutError):
        return BackendTimeout(f"ZooKeeper did not answer {what} in time")
    if isinstance(error, SessionExpiredError):
        return BackendUnavailable(f"the ZooKeeper session ended during {what}")
    if isinstance(error, KazooException):
        return BackendUnavailable(f"ZooKeeper failed {what}: {error!r}")
    return BackendUnavailable(f"ZooKeeper failed {what}: {error!r}")
