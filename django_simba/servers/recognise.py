"""How a server is recognised: the program this process runs, and the server's own methods on the stack."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import CodeType, FrameType

#: The programs that run Django's management commands (``python -m django`` runs ``django/__main__.py``).
MANAGE_PROGRAMS = frozenset({"manage.py", "django-admin", "django-admin.py"})


def started_as(argv: Sequence[str], program: str) -> bool:
    """Whether ``argv`` runs ``program``: its script, or ``python -m program``."""
    path = argv[0] if argv else ""
    return os.path.basename(path) == program or path.endswith(os.path.join(program, "__main__.py"))


def management_command(argv: Sequence[str]) -> str | None:
    """The management command ``argv`` runs (``""`` for none, as ``manage.py`` alone); None when it
    runs no management command. Django reads the command from the first argument, and so does this."""
    path = argv[0] if argv else ""
    if os.path.basename(path) not in MANAGE_PROGRAMS and not started_as(argv, "django"):
        return None
    command = argv[1] if len(argv) > 1 else ""
    return "" if command.startswith("-") else command


def program_name(argv: Sequence[str]) -> str:
    """The name a process runs under: its script's name, or the package of ``python -m``."""
    path = argv[0] if argv else ""
    base = os.path.basename(path)
    return os.path.basename(os.path.dirname(path)) if base == "__main__.py" else base


def test_run(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """Why this process is a test run ("" when it is not).

    A process a test starts inherits the test run's environment, but with a command line
    of its own: it counts as what that command line says.
    """
    path = argv[0] if argv else ""
    program = os.path.basename(path)
    if "pytest" in program or "py.test" in program:
        return "running tests (pytest)"
    if program == "__main__.py" and os.path.basename(os.path.dirname(path)) == "pytest":
        return "running tests (python -m pytest)"
    if list(argv) == ["-c"] and environ.get("PYTEST_XDIST_WORKER"):
        return "running tests (pytest-xdist worker)"
    if "PYTEST_CURRENT_TEST" in environ:
        return "running tests"
    if management_command(argv) == "test":
        return "running tests (manage.py test)"
    return ""


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
