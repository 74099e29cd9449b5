"""A flag that a signal handler may set: ``threading.Event`` cannot be.

A handler runs on the main thread between two of its bytecodes. If the main thread was inside
``Event.wait`` at that moment, holding the event's lock while it returned, the handler's
``Event.set`` waits for that same lock forever. Setting a :class:`Wakeup` takes no lock: a flag,
and a byte down a pipe that the waits select on (the byte is never read, so every later wait
sees it at once).
"""

from __future__ import annotations

import contextlib
import os
import select


class Wakeup:
    """Set once, from a signal handler or any thread; waited for by any thread.

    Its pipe is never closed: a thread that sets it late must not write into a descriptor the
    process has since reused (one per ``simba_run``, which ends with its command).
    """

    def __init__(self) -> None:
        self._set = False
        self._readable, self._writable = os.pipe()
        os.set_blocking(self._writable, False)

    def set(self) -> None:
        self._set = True
        with contextlib.suppress(BlockingIOError):  # the pipe is full: it is readable already
            os.write(self._writable, b"x")

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when ``timeout`` seconds passed first."""
        if not self._set:
            with contextlib.suppress(InterruptedError):
                select.select([self._readable], [], [], timeout)
        return self._set
