"""What a process that does not serve (``manage.py shell``) makes of elections and leader-mode tasks.

A test runs :func:`report` there and reads the one line of JSON it prints: a candidacy left to the
default never leads in such a process, one made with ``serving_only=False`` does (sync and async),
and a leader-mode ``@singleton_task`` is skipped with the reason.
"""

import asyncio
import json
import os

from django_simba import election, is_serving_process, singleton_task
from django_simba.aio import aelection

WAIT = 30.0


def report() -> None:
    name = os.environ["TINYSITE_NAME"]
    held = election(f"{name}:held")  # made before anything started the engine
    asked = election(f"{name}:asked", serving_only=False)
    asked.wait_decided(WAIT)
    found = {
        "serving": is_serving_process(),
        "held": [held.held, held.wait_decided(0), held.is_leader],
        "asked": [asked.held, asked.is_leader],
    }
    found.update(asyncio.run(_async_candidacies(name)))

    @singleton_task(f"{name}:task", wait_for_election=WAIT)
    def job() -> str:
        return "ran"

    outcome = job()
    found["task"] = outcome if isinstance(outcome, str) else [bool(outcome), outcome.reason]
    found["held_after"] = held.is_leader  # the engine runs here now, for the others: still not this one
    print("NONSERVING " + json.dumps(found), flush=True)


async def _async_candidacies(name: str) -> dict[str, object]:
    held = await aelection(f"{name}:aheld")  # made while the engine runs already
    asked = await aelection(f"{name}:aasked", serving_only=False)
    term = await asked.wait_elected(WAIT)
    return {
        "aheld": [held.election.held, await held.wait_decided(0), held.is_leader],
        "aasked": [asked.election.held, asked.is_leader, term.token > 0],
    }
