"""``manage.py simba_status``: sessions, leases and groups of the configured backend.

Exit codes: 0 shown; 1 invalid settings or arguments; 2 the backend cannot be
reached (the reason is printed, once: the client library's retry warnings are
dropped unless ``-v 2``); 130 Ctrl-C; 141 the reader of the output went away.
With ``--watch``, the exit code is that of the last refresh. With ``--json``,
stdout gets one JSON document whenever the report cannot be made (exit 1 or 2).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...operations.exits import UNREACHABLE, client_logs, command_errors
from ...operations.status import Snapshot, as_json, collect, render_table, tool_backend
from ..tool import ToolCommand

CLEAR_SCREEN = "\x1b[H\x1b[2J"


class Command(ToolCommand):
    help = "Show sessions, leases (holder, token, remaining time) and groups of the Simba backend."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON (one document per refresh).")
        parser.add_argument(
            "--prefix", default="", help="Only leases and groups whose name starts with this."
        )
        parser.add_argument("--watch", action="store_true", help="Refresh until interrupted (Ctrl-C).")
        parser.add_argument(
            "--interval", type=float, default=2.0, help="Seconds between refreshes with --watch (default 2)."
        )
        parser.add_argument(
            "--count", type=int, default=0, help="With --watch, stop after this many refreshes (0: never)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            failure = self.report(options)
        except CommandError as error:
            if options["json"]:  # a script reads stdout: it gets JSON that says what failed
                self.stdout.write(failure_json(error))
            raise
        if failure is not None:
            raise failure  # the last refresh's: its JSON was printed with that refresh

    def report(self, options: dict[str, Any]) -> CommandError | None:
        """Show one report, or watch; what a watch ended on, if its last refresh failed."""
        if options["interval"] <= 0 or options["count"] < 0:
            raise CommandError("--interval must be > 0 and --count >= 0")
        if not options["watch"]:
            snapshot = self.snapshot(options["prefix"], options["verbosity"])
            self.stdout.write(self.render(snapshot, options["json"]), ending="")
            return None
        return self.watch(options)

    def snapshot(self, prefix: str, verbosity: int = 1) -> Snapshot:
        with command_errors(), client_logs(verbosity), tool_backend() as backend:
            return collect(backend, prefix)

    def render(self, snapshot: Snapshot, as_machine: bool) -> str:
        if as_machine:
            return json.dumps(as_json(snapshot)) + "\n"
        return render_table(
            snapshot,
            heading=self.style.MIGRATE_HEADING,
            warning=self.style.WARNING,
            success=self.style.SUCCESS,
        )

    def watch(self, options: dict[str, Any]) -> CommandError | None:
        """Refresh in place on a terminal; elsewhere, one report after the other. Returns the last
        refresh's failure (the backend could not be reached), if it failed; raises any other error."""
        in_place = not options["json"] and self.stdout.isatty()
        stop = threading.Event()
        failure: CommandError | None = None
        refreshes = 0
        try:
            while True:
                try:
                    snapshot = self.snapshot(options["prefix"], options["verbosity"])
                    text = self.render(snapshot, options["json"])
                    failure = None
                except CommandError as error:
                    if error.returncode != UNREACHABLE:
                        raise
                    failure = error
                    text = self.style.ERROR(str(error)) + "\n"
                    if options["json"]:
                        text = failure_json(error) + "\n"
                self.stdout.write((CLEAR_SCREEN if in_place else "") + text, ending="")
                self.stdout.flush()
                refreshes += 1
                if options["count"] and refreshes >= options["count"]:
                    break
                stop.wait(options["interval"])
        except KeyboardInterrupt:
            pass
        return failure


def failure_json(error: CommandError) -> str:
    """The JSON document of a refresh that failed: the reason and the exit code it gives."""
    return json.dumps({"error": str(error), "exit_code": error.returncode})
