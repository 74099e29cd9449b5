"""Whether the engine starts when Django is ready (``AUTOSTART``): in a serving process only, never in tests.

A process that forks the processes that serve starts nothing itself: each child
it forks starts its engine. A test run starts nothing either: a test must not
hold a session in whatever database or server the settings name before the test
runner has switched them to the test ones, nor keep it alive between tests.
Everywhere else the engine starts on first use, if ever.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence

from . import serving
from .recognise import test_run

logger = logging.getLogger("django_simba")


def autostart_decision(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[bool, str]:
    """Whether this process should start the engine at start-up, and why."""
    found = _decide(argv, environ)
    return found.serves, found.why


def _decide(argv: Sequence[str], environ: Mapping[str, str]) -> serving.Decision:
    testing = test_run(argv, environ)
    if testing:
        return serving.Decision(serving.Role.IDLE, testing)  # for starting: tests start on first use
    if argv is sys.argv and environ is os.environ:
        return serving.decision()
    prefork_parent, commands = serving.rule_settings()
    return serving.detect(
        argv, environ, prefork_parent=prefork_parent, serving_commands=commands, debug=serving.debug_setting()
    )


def maybe_autostart(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Start the engine if AUTOSTART allows it here. Never raises: a bad setting is logged, with its id."""
    from .. import conf, registry
    from ..checks import log_settings_problems
    from ..engine.prefork import hold_for_children

    found = _decide(sys.argv if argv is None else argv, os.environ if environ is None else environ)
    if found.role is serving.Role.IDLE:
        logger.debug("django-simba: not starting the engine (%s)", found.why)
        return False
    # A server runs no system checks: it reports bad settings itself, at once.
    if log_settings_problems(logger):
        return False
    try:
        settings = conf.get_settings()
    except Exception:
        return False  # reported by the system checks, with a hint
    if not settings.autostart:
        return False
    try:
        engine = registry.get_engine()
        if not found.serves or engine.fork_hold.active:
            hold_for_children(engine, start_in_child=True)
            logger.debug("django-simba: not starting the engine here: the processes it forks start theirs")
            return False
        engine.start()
    except Exception:
        logger.exception("django-simba: could not start the engine; it will start on first use")
        return False
    logger.debug("django-simba: engine started (%s)", found.why)
    return True
