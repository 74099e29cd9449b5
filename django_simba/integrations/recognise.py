"""How a server is recognised: the program this process runs, and the server's own methods on the stack."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from types import CodeType, FrameType


def started_as(argv: Sequence[str], program: str) -> bool:
    """Whether ``argv`` runs ``program``: its script, or ``python -m program``."""
    path = argv[0] if argv else ""
    return os.path.basename(path) == program or path.endswith(os.path.join(program, "__main__.py"))


def main_thread_codes() -> list[CodeType]:
    """The code of every frame the main thread is in, innermost first (it loads the application)."""
    main = threading.main_thread()
    if threading.current_thread() is main:
        frame: FrameType | None = sys._getframe(1)
    else:
        frame = sys._current_frames().get(main.ident or 0)
    return list(_codes(frame))


def current_codes() -> list[CodeType]:
    return list(_codes(sys._getframe(1)))


def _codes(frame: FrameType | None) -> Iterator[CodeType]:
    while frame is not None:
        yield frame.f_code
        frame = frame.f_back
