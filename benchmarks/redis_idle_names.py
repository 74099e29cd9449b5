"""What idle names cost on Redis: keys and memory left by names locked once and released.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/redis_idle_names.py [--names 5000] [--wait]

On a redis-server of its own (no persistence), one session acquires and releases ``--names``
distinct names (``invoice:<n>``), then closes. It prints the keys, the keys without an expiry,
and ``used_memory`` above what it was before (scripts loaded, marker made), per name: right after
the releases, and with ``--wait`` once the idle time of the hashes (``IDLE_LEASE_MS``) has passed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from django_simba.backends.redis import RedisBackend
from tests.servers.redis_cluster import redis_server


def counts(client: redis.Redis, baseline: int) -> tuple[int, int, int]:
    """(keys, keys without expiry, bytes of used_memory above ``baseline``)."""
    keys = list(client.scan_iter(count=1000))
    forever = sum(1 for key in keys if client.pttl(key) == -1)
    return len(keys), forever, int(client.info("memory")["used_memory"]) - baseline


def report(label: str, names: int, found: tuple[int, int, int]) -> None:
    keys, forever, used = found
    print(f"| {label} | {keys} | {forever} | {used / 1024:.0f} KiB | {used / names:.0f} B |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", type=int, default=5000)
    parser.add_argument("--wait", action="store_true", help="also measure once idle hashes have expired")
    args = parser.parse_args()
    with redis_server() as server, server.client() as client:
        backend = RedisBackend({"url": server.url}, timeout=5)
        backend.close_session(backend.open_session(15, "warm").session_id)  # scripts loaded, marker made
        client.execute_command("MEMORY", "PURGE")
        baseline = int(client.info("memory")["used_memory"])
        sid = backend.open_session(15, "idle-names").session_id
        for i in range(args.names):
            assert backend.acquire(sid, f"invoice:{i}") is not None
            backend.release(sid, f"invoice:{i}")
        backend.keep_alive(sid, 15)  # drops the released names from the session's index
        backend.close_session(sid)
        print(f"redis-server {client.info('server')['redis_version']}, {args.names} names locked once")
        print("\n| when | keys | without expiry | used_memory above empty | per name |")
        print("|---|---|---|---|---|")
        report("after the releases", args.names, counts(client, baseline))
        if args.wait:
            from django_simba.backends.redis.keys import IDLE_LEASE_MS

            deadline = time.monotonic() + IDLE_LEASE_MS / 1000 + 30
            while client.dbsize() > 2 and time.monotonic() < deadline:
                time.sleep(1)
            client.execute_command("MEMORY", "PURGE")
            report("after the idle time", args.names, counts(client, baseline))
        backend.close()


if __name__ == "__main__":
    main()
