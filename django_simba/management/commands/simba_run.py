"""``manage.py simba_run (--lock NAME | --leader NAME) [options] -- COMMAND...``

Runs COMMAND only while this process holds the lock NAME (or leads the election
NAME); on every other host it is skipped. For cron jobs installed on several
hosts. See :mod:`django_simba.operations.runner` for signals and what happens when the
term is lost.

Exit codes: COMMAND's own (128 + N when a signal N ended it); 0 when skipped
(``--skip-code`` changes it); 1 invalid arguments or settings; 2 the backend
cannot be reached; 3 the term was lost while COMMAND ran, or renewals failed
close to its end (COMMAND was stopped); 126 / 127 COMMAND not executable / not
found; 128 + N when signal N stopped ``simba_run`` before COMMAND started
(130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...operations.exits import command_errors
from ...operations.runner import Mode, command_line, run_exclusively
from ..tool import ToolCommand


class Command(ToolCommand):
    help = "Run a command only while holding a lock or leading an election (cron on several hosts)."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--lock", metavar="NAME", help="Run while holding the lock NAME.")
        which.add_argument("--leader", metavar="NAME", help="Run while leading the election NAME.")
        parser.add_argument(
            "--timeout",
            type=float,
            default=0.0,
            help="Seconds to wait for the lock or leadership before skipping (default 0: skip at once).",
        )
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--shell", action="store_true", help="Run COMMAND through /bin/sh -c.")
        how.add_argument(
            "--manage", action="store_true", help="COMMAND is a management command of this project."
        )
        parser.add_argument(
            "--kill-after",
            type=float,
            default=10.0,
            help="Seconds the command gets between SIGTERM and SIGKILL when the term ends or is about to "
            "(default 10); keep it below LEASE_DURATION - RENEW_INTERVAL.",
        )
        parser.add_argument("--skip-code", type=int, default=0, help="Exit code when skipped (default 0).")
        parser.add_argument("command", nargs=argparse.REMAINDER, help="The command, after --.")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["lock"] or options["leader"]
        mode: Mode = "lock" if options["lock"] else "leader"
        if options["timeout"] < 0 or options["kill_after"] <= 0:
            raise CommandError("--timeout must be >= 0 and --kill-after > 0")
        try:
            argv = command_line(options["command"], shell=options["shell"], manage=options["manage"])
        except ValueError as error:
            raise CommandError(str(error)) from error
        with command_errors():
            outcome = run_exclusively(
                argv, name, mode=mode, timeout=options["timeout"], kill_after=options["kill_after"]
            )
        if outcome.skipped:
            self.stdout.write(outcome.message)
            if options["skip_code"]:
                raise CommandError(outcome.message, returncode=options["skip_code"])
            return
        if not outcome.ran:
            raise CommandError(outcome.message, returncode=outcome.exit_code)
        if outcome.exit_code:
            raise CommandError(f"{argv[0]}: {outcome.message}", returncode=outcome.exit_code)
        if options["verbosity"] > 1:
            self.stdout.write(f"{argv[0]}: {outcome.message} (token {outcome.token})")
