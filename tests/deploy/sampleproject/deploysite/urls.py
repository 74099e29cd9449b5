import asyncio
import os
import threading
import time

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path

from django_simba import alock, group, lock, owner
from django_simba.testing import wait_until

#: How long a participant of ``take_turns`` waits for the others.
TURNS_TIMEOUT = 20.0


def whoami(request: HttpRequest) -> HttpResponse:
    return HttpResponse(str(os.getpid()))


def take_turns(request: HttpRequest) -> JsonResponse:
    """Hold a lock named after this process, and meanwhile a shared one, in turn with the others.

    ``?prefix=P&count=N``, sent N times at once. The holder of ``P.shared`` keeps it until every
    other participant waits for it or is done with it (a worker serving one request at a time
    stays busy until then, so the N requests run in N different workers). What each saw comes
    back as JSON.
    """
    prefix, count = request.GET["prefix"], int(request.GET["count"])
    blocked, done = group(f"{prefix}.blocked"), group(f"{prefix}.done")

    def the_others_wait_or_are_done() -> bool:
        return len(blocked.members()) + len(done.members()) >= count - 1

    with lock(f"{prefix}.own.{os.getpid()}", timeout=TURNS_TIMEOUT) as own:
        shared = lock(f"{prefix}.shared")
        term = shared.try_acquire()
        if term is None:
            blocked.join()
            term = shared.acquire(TURNS_TIMEOUT)
            blocked.leave()
        acquired = time.monotonic()
        held_by = owner(term.name)  # the backend's view, while this process holds it
        wait_until(the_others_wait_or_are_done, TURNS_TIMEOUT, message="the others waiting")
        valid = term.is_valid()
        released = time.monotonic()
        shared.release()
        done.join()
    return JsonResponse(
        {
            "pid": os.getpid(),
            "session": own.session_id,
            "own_token": own.token,
            "shared_token": term.token,
            "shared_held_by": held_by.session_id if held_by else None,
            "shared_valid": valid,
            "acquired": acquired,
            "released": released,
        }
    )


#: How long ``critical`` holds its lock.
CRITICAL_SECONDS = 0.005


async def critical(request: HttpRequest) -> JsonResponse:
    """Hold ``?name=`` for 5 ms in an async view; when (monotonic clock, shared by the host's processes)."""
    async with alock(request.GET["name"], timeout=60) as term:
        entered = time.monotonic_ns()
        threads = threading.active_count()
        await asyncio.sleep(CRITICAL_SECONDS)
        left = time.monotonic_ns()
    return JsonResponse(
        {"pid": os.getpid(), "token": term.token, "entered": entered, "left": left, "threads": threads}
    )


urlpatterns = [path("", whoami), path("turns/", take_turns), path("critical/", critical)]
