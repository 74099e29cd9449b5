"""What the operator commands share: exit codes true for every way they end (docs/commands.rst).

Django's own parser exits with 2 on a usage error, the code these commands keep for
"the backend cannot be reached"; a reader that stops reading (``simba_status | head``)
ended them in a ``BrokenPipeError`` traceback, and Ctrl-C in a ``KeyboardInterrupt``
one. Here a usage error exits with 1 (invalid arguments), a closed pipe quietly with
141 (as a process that SIGPIPE ends), and Ctrl-C with 130.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

#: Invalid arguments, as for an invalid name or setting.
USAGE = 1
#: The reader of the output went away (128 + SIGPIPE).
PIPE_CLOSED = 141
#: Interrupted by Ctrl-C (128 + SIGINT).
INTERRUPTED = 130


class ToolCommand(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        refuse = parser.error

        def error(message: str) -> Any:
            if parser.called_from_command_line:
                parser.print_usage(sys.stderr)
                parser.exit(USAGE, f"{parser.prog}: error: {message}\n")
            return refuse(message)  # called from code: Django raises CommandError

        parser.error = error  # type: ignore[method-assign]
        return parser

    def run_from_argv(self, argv: list[str]) -> None:
        try:
            super().run_from_argv(argv)
            sys.stdout.flush()  # a pipe closed early fails here, at the latest
        except BrokenPipeError:
            # Nothing more can be said to that reader; keep the interpreter's own flush quiet too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(PIPE_CLOSED)
        except KeyboardInterrupt:
            sys.exit(INTERRUPTED)
