"""``manage.py demo_worker --run RUN``: call the demo job at every period until SIGTERM.

Every worker fires the job on the same schedule (like cron on every host);
``@singleton_task`` lets it run on the elected leader only.
"""

import os
import select
import signal
import time

from django.core.management.base import BaseCommand

from ...jobs import tick


class Command(BaseCommand):
    help = "A worker of the simba_demo: fires the ticker job every period until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--run", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--interval", type=float, default=0.25)

    def handle(self, *args, run, name, interval, **options):
        # SIGTERM's handler takes no lock: it runs on this thread between two of its steps, and a
        # threading.Event's set() there can wait forever for the lock its own wait() holds. The
        # handler notes the signal and writes a byte that the wait below selects on.
        stopped = []
        wake, woken = os.pipe()
        os.set_blocking(woken, False)

        def on_sigterm(signum, frame):
            stopped.append(signum)
            os.write(woken, b"x")

        signal.signal(signal.SIGTERM, on_sigterm)
        while not stopped:
            # The schedule: period boundaries on this host's clock, as cron would fire them.
            now = time.time()
            period = int(now // interval) + 1
            select.select([wake], [], [], max(0.0, period * interval - now))
            if stopped:
                break
            result = tick(run, period, name)
            self.stdout.write(f"period {period}: {'ran' if result is True else result}")
            self.stdout.flush()
        # Exiting closes the session (at interpreter exit): another worker takes over at once.
