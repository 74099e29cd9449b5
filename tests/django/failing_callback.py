"""A process whose leader callback fails on a real server's refusal, quoting the URL it dialled.

Run as ``python -m tests.django.failing_callback URL`` with ``DJANGO_SETTINGS_MODULE`` and
``SIMBA_CHILD_SIMBA`` set: it becomes the leader of an election whose ``on_elected`` pings the Redis
at ``URL`` (a password the server refuses) and raises an error that names the URL, chained to the
driver's. The engine logs the callback's failure with its traceback; the process then exits.
"""

from __future__ import annotations

import sys
import threading


def main(url: str) -> None:
    import django

    django.setup()
    import redis

    from django_simba import election

    done = threading.Event()

    def publish_reports(term: object) -> None:
        try:
            redis.Redis.from_url(url, socket_timeout=5).ping()
        except redis.RedisError as error:
            raise RuntimeError(f"the reports store at {url} refused us") from error
        finally:
            done.set()

    candidacy = election("logs.reports", on_elected=publish_reports, serving_only=False)
    try:
        if not done.wait(30):
            sys.exit("the callback never ran")
    finally:
        candidacy.close()


if __name__ == "__main__":
    main(sys.argv[1])
