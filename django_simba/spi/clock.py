"""The local clock every safety decision of this process reads.

A term is trusted until a local deadline; that deadline is only sound on a clock that
keeps counting while the machine is suspended (a laptop lid, a paused or migrated VM),
because the backend's clock does. Python's ``time.monotonic()`` does not on Linux
(``CLOCK_MONOTONIC`` stops during suspend), so:

* Linux: ``CLOCK_BOOTTIME``, which counts suspended time;
* macOS: ``clock_gettime(CLOCK_MONOTONIC)``, which Apple documents as counting while
  asleep (``time.monotonic()`` there reads a clock that stops);
* anywhere else: ``time.monotonic()``, which may stop during suspend (see the docs).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable


def _pick() -> tuple[Callable[[], float], str]:
    # partial, not a lambda: the engine reads the clock several times a lock cycle, and a partial
    # of a builtin calls it without a Python frame.
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None and _works(boottime):
        return functools.partial(time.clock_gettime, boottime), "CLOCK_BOOTTIME"
    if sys.platform == "darwin" and _works(time.CLOCK_MONOTONIC):
        return functools.partial(time.clock_gettime, time.CLOCK_MONOTONIC), "CLOCK_MONOTONIC (darwin)"
    return time.monotonic, "time.monotonic"


def _works(clock_id: int) -> bool:
    try:
        time.clock_gettime(clock_id)
    except OSError:  # a kernel or sandbox without that clock
        return False
    return True


local_clock, LOCAL_CLOCK_NAME = _pick()
local_clock.__doc__ = "Seconds on a clock that never goes back and counts suspended time where it can."

__all__ = ["LOCAL_CLOCK_NAME", "local_clock"]
