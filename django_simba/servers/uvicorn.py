"""Recognising a process uvicorn serves from.

``uvicorn`` (and each of its ``--workers``, spawned with the parent's command line)
loads the application in ``Config.load``; its supervisor (``--workers``, ``--reload``)
never loads it, so never loads Django. A program that calls ``uvicorn.run()`` is
recognised by that method on its main thread's stack. Nothing here imports uvicorn.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .recognise import main_thread_codes, started_as


def runs_this_process(argv: Sequence[str]) -> bool:
    if started_as(argv, "uvicorn"):
        return True
    config = sys.modules.get("uvicorn.config")
    return config is not None and config.Config.load.__code__ in main_thread_codes()
