"""A writer process of the race tests: fenced writes with one token, each when the test says go.

Run as ``python -m tests.fencing.racer CONFIG_JSON``; the config names the
database (Django's settings of the test database), the lease and token, the
writer's letter and the mode. The process prints ``ready`` once connected;
then, for every line ``N`` it reads, it writes the row ``keyN`` once and
answers ``accepted`` or ``refused``, until stdin closes. The test sends each
``N`` to both writers at once, so every row is a race of its own.

``update`` writes a row that exists; ``upsert`` creates or writes it, racing
the other writer to create it. Each accepted write appends the writer's letter
to ``history`` in the same statement, so a row tells in which order the writes
were applied.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def configure(config: dict[str, Any]) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="django-simba-fencing-racer",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES={"default": config["database"]},
        INSTALLED_APPS=["django_simba"],
    )
    django.setup()


def write(config: dict[str, Any], index: int) -> str:
    from django.db.models import Value
    from django.db.models.functions import Concat

    from django_simba.fencing import Fence, StaleToken

    from .models import Document

    fence = Fence(config["lease"], config["token"])
    letter = config["letter"]
    key = f"{config['key']}{index}"
    written = Concat("history", Value(letter))
    try:
        if config["mode"] == "update":
            Document.objects.filter(key=key).fenced_update(fence, history=written)
        else:
            Document.objects.fenced_upsert(
                fence, key=key, defaults={"history": written}, create_defaults={"history": letter}
            )
    except StaleToken:
        return "refused"
    return "accepted"


def main() -> None:
    config = json.loads(sys.argv[1])
    configure(config)
    from django.db import connection

    connection.ensure_connection()
    print("ready", flush=True)
    for line in sys.stdin:
        print(write(config, int(line)), flush=True)
    connection.close()


if __name__ == "__main__":
    main()
