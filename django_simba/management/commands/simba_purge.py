"""``manage.py simba_purge``: remove the sessions of crashed processes now.

The engine already purges at most once per ``PURGE_INTERVAL``; this is for
operators and cron. Exit codes: 0 done; 1 invalid settings or arguments; 2 the
backend cannot be reached; 130 Ctrl-C; 141 the reader of the output went away.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...operations.exits import client_logs, command_errors
from ...operations.status import purge, tool_backend
from ...spi import MAX_PURGE_LIMIT
from ..tool import ToolCommand


class Command(ToolCommand):
    help = "Remove expired sessions (of crashed processes) with their leases' holders and memberships."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--limit",
            type=int,
            default=MAX_PURGE_LIMIT,
            help=f"Sessions removed per batch, 1 to {MAX_PURGE_LIMIT} (default {MAX_PURGE_LIMIT}).",
        )
        parser.add_argument("--once", action="store_true", help="Run one batch only.")

    def handle(self, *args: Any, **options: Any) -> None:
        limit = options["limit"]
        if not 0 < limit <= MAX_PURGE_LIMIT:
            raise CommandError(f"--limit must be from 1 to {MAX_PURGE_LIMIT}")
        with command_errors(), client_logs(options["verbosity"]), tool_backend() as backend:
            if not backend.needs_purge:
                self.stdout.write(
                    f"The {backend.vendor} backend removes expired sessions by itself: nothing to purge."
                )
                return
            removed = purge(backend, limit=limit, batches=1 if options["once"] else None)
        self.stdout.write(self.style.SUCCESS(f"Purged {removed} expired session{'s' * (removed != 1)}."))
