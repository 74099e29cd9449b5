"""The Django application: checks, settings cache, and where the keep-alive thread starts.

``ready()`` is cheap and idempotent: it runs for every management command, may
run twice, and runs in both processes of the autoreloader. It starts the engine
only where a process serves (see :func:`autostart_decision`); everywhere else
the engine starts lazily on first use. A forked child restarts it by itself
(the engine's fork hook).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed

logger = logging.getLogger("django_simba")

#: Commands that never start the keep-alive thread (they do not coordinate anything).
QUIET_COMMANDS = frozenset(
    {
        "check",
        "collectstatic",
        "compilemessages",
        "createcachetable",
        "dbshell",
        "diffsettings",
        "dumpdata",
        "findstatic",
        "flush",
        "inspectdb",
        "loaddata",
        "makemessages",
        "makemigrations",
        "migrate",
        "optimizemigration",
        "sendtestemail",
        "shell",
        "showmigrations",
        "sqlflush",
        "sqlmigrate",
        "sqlsequencereset",
        "squashmigrations",
        "startapp",
        "startproject",
        "test",
        "testserver",
        "simba_status",
        "simba_purge",
    }
)


def autostart_decision(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[bool, str]:
    """Whether this process should start the engine at start-up, and why."""
    testing = _test_run(argv, environ)
    if testing:
        return False, testing
    program = os.path.basename(argv[0]) if argv else ""
    if program in ("manage.py", "django-admin", "django-admin.py", "__main__.py"):
        command = argv[1] if len(argv) > 1 else ""
        if command in QUIET_COMMANDS or not command or command.startswith("-"):
            return False, f"management command {command or '(none)'!r}"
        if command == "runserver" and "--noreload" not in argv and environ.get("RUN_MAIN") != "true":
            return False, "autoreloader's watcher process (the serving child starts it)"
        return True, f"management command {command!r}"
    return True, "server process"


def _test_run(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """Why this process is a test run ("" when it is not): tests start the engine on first use only.

    A test must not hold a session in whatever database or server the settings name before the
    test runner has switched them to the test ones, nor keep it alive between tests.
    """
    path = argv[0] if argv else ""
    program = os.path.basename(path)
    if "pytest" in program or "py.test" in program:
        return "running tests (pytest)"
    if program == "__main__.py" and os.path.basename(os.path.dirname(path)) == "pytest":
        return "running tests (python -m pytest)"
    # A pytest-xdist worker runs as ``python -c``; a process a test starts inherits the variable
    # too, but with a command line of its own, and counts as what that command line says.
    if list(argv) == ["-c"] and environ.get("PYTEST_XDIST_WORKER"):
        return "running tests (pytest-xdist worker)"
    if "PYTEST_CURRENT_TEST" in environ:
        return "running tests"
    return ""


class SimbaConfig(AppConfig):
    name = "django_simba"
    verbose_name = "Simba coordination"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)

        setting_changed.connect(_on_setting_changed, dispatch_uid="django_simba.setting_changed")
        from .integrations import wiring

        wiring.wire_servers()
        maybe_autostart()


def maybe_autostart(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Start the engine if AUTOSTART allows it here. Never raises: a bad setting is logged, with its id."""
    from . import conf, registry
    from .checks import log_settings_problems
    from .engine.prefork import hold_for_children

    start, reason = autostart_decision(
        sys.argv if argv is None else argv, os.environ if environ is None else environ
    )
    # A serving process runs no system checks: it reports bad settings itself, at once.
    if start and log_settings_problems(logger):
        return False
    try:
        settings = conf.get_settings()
    except Exception:
        return False  # reported by the system checks, with a hint
    if not settings.autostart:
        return False
    if not start:
        logger.debug("django-simba: not starting the engine (%s)", reason)
        return False
    try:
        engine = registry.get_engine()
        if engine.fork_hold.active:
            hold_for_children(engine, start_in_child=True)
            logger.debug("django-simba: not starting the engine here; the processes it forks start theirs")
            return False
        engine.start()
    except Exception:
        logger.exception("django-simba: could not start the engine; it will start on first use")
        return False
    logger.debug("django-simba: engine started (%s)", reason)
    return True


def _on_setting_changed(setting: str, **kwargs: Any) -> None:
    if setting == "SIMBA":
        from . import conf, registry

        conf.clear_cache()
        registry.reset()
