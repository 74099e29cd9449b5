"""``manage.py simba_tokens``: the last token of every name on the configured backend, and the highest.

Run it on the backend you move from; set ``SIMBA["TOKEN_FLOOR"]`` to the highest
on the one you move to (docs/moving.rst). On Redis the highest is the server's
clock in microseconds, above the tokens of names whose hash expired too. Exit
codes: 0 shown; 1 invalid arguments or settings, or a backend that lists no
tokens (ZooKeeper); 2 the backend cannot be reached; 130 Ctrl-C; 141 the reader
of the output went away.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...operations.exits import command_errors
from ...operations.tokens import issued_tokens
from ...spi import NotSupported
from ..tool import ToolCommand


class Command(ToolCommand):
    help = "Print the last token of every name, and the TOKEN_FLOOR that a move to another backend needs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--prefix", default="", help="Only names starting with this.")
        parser.add_argument("--json", action="store_true", help="Print JSON: {name: token}, and the highest.")

    def handle(self, *args: Any, **options: Any) -> None:
        with command_errors():
            try:
                found = issued_tokens(options["prefix"])
            except NotSupported as error:
                raise CommandError(str(error)) from error
        if options["json"]:
            document: dict[str, Any] = {"tokens": found.tokens, "highest": found.highest}
            if found.clock is not None:
                document["clock"] = found.clock
            self.stdout.write(json.dumps(document))
            return
        width = max((len(name) for name in found.tokens), default=4)
        self.stdout.write(f"{'NAME'.ljust(width)}  TOKEN")
        for name, token in found.tokens.items():
            self.stdout.write(f"{name.ljust(width)}  {token}")
        floor = f" (TOKEN_FLOOR {found.floor} included)" if found.floor else ""
        if found.clock is not None:
            self.stdout.write(
                f"The server's clock in microseconds{floor}, {found.clock}, is above every token it issued, "
                "also of the names whose hash expired (not listed)."
            )
            floor = ""
        self.stdout.write(
            f"Highest token on the {found.backend} backend: {found.highest}{floor}. On the backend you move "
            f"to, set SIMBA['TOKEN_FLOOR'] = {found.highest}."
        )
