"""Closing the session on SIGTERM, in a process where SIGTERM would otherwise kill it outright.

The handler closes the process's engine (on a thread of its own, for at most
:data:`CLOSE_TIMEOUT` seconds: the main thread may be anywhere), then hands the
signal to the handler it replaced, or, where that was the default action, kills
the process with SIGTERM as before. ``runserver --noreload`` gets it by itself.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

logger = logging.getLogger("django_simba")

#: How long the handler waits for the session to close before the process goes on stopping.
CLOSE_TIMEOUT = 2.0


def close_on_sigterm() -> bool:
    """Install the handler (main thread only). True when installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_IGN, None) or getattr(previous, "closes_simba_session", False):
        return False  # ignored, set outside Python (nothing to chain to), or installed already

    def handler(signum: int, frame: FrameType | None) -> None:
        close_engine(CLOSE_TIMEOUT)
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)  # the default action: terminate, as without us
        signal.raise_signal(signum)

    handler.closes_simba_session = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGTERM, handler)
    return True


def close_engine(timeout: float) -> None:
    """Close the process's engine, waiting at most ``timeout`` seconds."""
    from .. import registry

    closer = threading.Thread(target=_close, args=(registry,), name="simba-close", daemon=True)
    closer.start()
    closer.join(timeout)
    if closer.is_alive():
        logger.warning("django-simba: the session did not close within %.1f s; it will expire", timeout)


def _close(registry: Any) -> None:
    try:
        registry.reset()
    except Exception:
        logger.exception("django-simba: closing the session failed")
