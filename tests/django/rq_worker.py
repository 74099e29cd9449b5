"""The worker class of the tests' ``rq worker`` processes: RQ's own, without its command channel.

RQ's worker listens for commands (shutdown, stop a job) on a pubsub thread that waits up to
60 s for a message. On its way out (``Worker.unsubscribe``) it sends UNSUBSCRIBE, then stops
that thread. The reply to UNSUBSCRIBE wakes the thread; when the thread reads it before the main
thread clears the thread's running flag (the main thread descheduled between the two, on a
loaded machine), the thread waits again, up to 60 s, for a subscription that never comes.
redis-py 8.2's ``PubSubWorkerThread.stop()`` joins the thread with no bound, so ``rq worker
--burst`` quit a minute late (rq 3.0.0, redis-py 8.2.0: in about half of CI's second row).

The tests send their workers no command: this worker does not subscribe, so it quits at once.
The module imports neither Django nor django_simba: the worker's main process stays as RQ
makes it, and only its work horses import the jobs (``tests.django.queues``).
"""

from __future__ import annotations

from rq import Worker


class CommandlessWorker(Worker):
    """RQ's forking worker, listening for no commands."""

    def subscribe(self) -> None:
        """Start no pubsub thread: ``unsubscribe`` then has nothing to stop."""
