"""``manage.py simba_demo``: three workers, one leader, a SIGKILL, a take-over, and the proof.

Starts worker processes that all fire the same periodic job; ``@singleton_task``
runs it on the elected leader only, and every execution writes through a
fencing token. The demo shows who leads with which token, kills the leader
with SIGKILL, shows the take-over with a higher token, stops the rest, and
checks from the rows that no tick ran twice. Exit status 1 if the proof fails.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from django_simba.conf import get_settings
from django_simba.registry import build_backend

from ...jobs import JOB
from ...models import Tick, Ticker
from ...proof import prove

MANAGE_PY = Path(__file__).resolve().parents[3] / "manage.py"


def timeline(run):
    """Who ran which periods, e.g. ``worker-2 x4 (token 1) | 8 periods without a leader | ...``."""
    parts, previous, streak = [], None, []
    for period, worker, token in (
        Tick.objects.filter(run=run).order_by("period", "id").values_list("period", "worker", "token")
    ):
        if streak and (worker, token) != streak[0][1:]:
            parts.append(f"{streak[0][1]} x{len(streak)} (token {streak[0][2]})")
            streak = []
        if previous is not None and period - previous > 1:
            if streak:
                parts.append(f"{streak[0][1]} x{len(streak)} (token {streak[0][2]})")
                streak = []
            parts.append(f"{period - previous - 1} periods without a leader")
        streak.append((period, worker, token))
        previous = period
    if streak:
        parts.append(f"{streak[0][1]} x{len(streak)} (token {streak[0][2]})")
    return " | ".join(parts) or "no ticks"


class Worker:
    def __init__(self, name: str, process: subprocess.Popen, log: Path) -> None:
        self.name, self.process, self.log = name, process, log

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(f"    {line}" for line in text[-lines:])


class Command(BaseCommand):
    help = "Show leader election, a SIGKILL of the leader, the take-over and a proof that no tick ran twice."

    def add_arguments(self, parser):
        parser.add_argument("--workers", type=int, default=3)
        parser.add_argument("--lease", type=float, default=2.0, help="LEASE_DURATION of the workers.")
        parser.add_argument("--renew", type=float, default=0.5, help="RENEW_INTERVAL of the workers.")
        parser.add_argument("--interval", type=float, default=0.25, help="Seconds between ticks.")
        parser.add_argument("--ticks", type=int, default=6, help="Ticks to see before the kill and after.")
        parser.add_argument("--timeout", type=float, default=60.0, help="Give up after this many seconds.")

    def handle(self, *args, **options):
        if options["workers"] < 2 or options["ticks"] < 1 or options["renew"] > options["lease"] / 2:
            raise CommandError(
                "use at least 2 workers and 1 tick, and a renew interval of at most half the lease"
            )
        self.started = time.monotonic()
        self.ticks_shown = 0
        self.deadline = self.started + options["timeout"]
        call_command("migrate", verbosity=0)  # a fresh checkout has no tables yet
        run = uuid.uuid4().hex[:12]
        Ticker.objects.create(run=run)
        simba = get_settings()
        self.stdout.write(
            self.style.MIGRATE_HEADING(
                f"django-simba demo: {options['workers']} workers share the job {JOB!r}"
            )
        )
        database = settings.DATABASES["default"]["NAME"]
        self.stdout.write(
            f"  backend {simba.backend_alias} on {connection.vendor} ({database}), "
            f"lease {options['lease']:g} s, renew {options['renew']:g} s, "
            f"a tick every {options['interval']:g} s"
        )
        backend = build_backend(simba)  # the demo only observes: it opens no session
        logs = Path(tempfile.mkdtemp(prefix="simba-demo-"))
        workers = self.start_workers(run, options, logs)
        try:
            facts = self.play(run, backend, workers, options)
        except CommandError:
            for worker in workers.values():
                self.stderr.write(f"  log of {worker.name} ({worker.log}):\n{worker.tail()}")
            raise
        finally:
            self.stop_workers(workers)
            backend.close()
        self.summarize(run, facts)
        shutil.rmtree(logs, ignore_errors=True)  # kept when anything failed

    # -- the story -------------------------------------------------------------------------

    def play(self, run, backend, workers, options):
        self.say(f"started {', '.join(f'{w.name} (pid {w.process.pid})' for w in workers.values())}")
        leader, token = self.watch(
            backend, run, workers, lambda holder, ticks: holder and ticks >= options["ticks"]
        )
        self.say(
            self.style.WARNING(
                f"SIGKILL -> {leader.name} (pid {leader.process.pid}), the leader, token {token}"
            )
        )
        killed_at = time.monotonic()
        kill_period = int(time.time() // options["interval"])
        leader.process.send_signal(signal.SIGKILL)
        leader.process.wait()
        self.say(
            f"{leader.name} is dead; its lease stays taken until its session expires "
            f"(at most {options['lease']:g} s)"
        )
        ticks_before = Tick.objects.filter(run=run).count()
        new_leader, new_token = self.watch(
            backend,
            run,
            workers,
            lambda holder, ticks: (
                holder
                and holder.token > token
                and Tick.objects.filter(run=run, token=holder.token).count() >= options["ticks"]
            ),
            dead={leader.name},
        )
        takeover = self.leader_seen_at - killed_at
        since = Tick.objects.filter(run=run).count() - ticks_before
        self.say(
            self.style.SUCCESS(
                f"take-over: {new_leader.name} leads with token {new_token} (was {token}), "
                f"{takeover:.1f} s after the kill; {since} ticks since"
            )
        )
        return {"killed": leader.name, "killed_token": token, "kill_period": kill_period}

    def watch(self, backend, run, workers, done, dead=frozenset()):
        """Poll who leads and the tick count, print changes, until ``done(holder, ticks)``."""
        seen_holder = None
        while True:
            if time.monotonic() > self.deadline:
                raise CommandError("the demo timed out (see the workers' logs below)")
            for worker in workers.values():
                if worker.name not in dead and worker.process.poll() is not None:
                    raise CommandError(
                        f"{worker.name} exited unexpectedly with status {worker.process.returncode}"
                    )
            holder = backend.owner(JOB)
            ticks = Tick.objects.filter(run=run).count()
            key = (holder.session_id, holder.token) if holder else None
            if key != seen_holder:
                seen_holder = key
                if holder is None:
                    self.say("no leader")
                else:
                    name = holder.metadata.split()[0]
                    gone = " (killed; its session has not expired yet)" if name in dead else ""
                    self.say(f"leader: {name}, token {holder.token}{gone}")
                    if name not in dead:
                        self.leader_seen_at = time.monotonic()  # when a live leader was first seen
            if ticks // 4 > self.ticks_shown // 4:
                last = Tick.objects.filter(run=run).order_by("-id").first()
                self.say(f"  {ticks} ticks so far; the last by {last.worker} with token {last.token}")
                self.ticks_shown = ticks
            if done(holder, ticks):
                name = holder.metadata.split()[0]
                return workers[name], holder.token
            time.sleep(0.05)

    def summarize(self, run, facts):
        proof = prove(
            run, killed=facts["killed"], killed_token=facts["killed_token"], kill_period=facts["kill_period"]
        )
        self.stdout.write("")
        self.stdout.write(self.style.MIGRATE_HEADING("Summary"))
        self.stdout.write(f"  timeline: {timeline(run)}")
        for check in proof.checks:
            mark = self.style.SUCCESS("ok  ") if check.ok else self.style.ERROR("FAIL")
            self.stdout.write(f"  {mark} {check.claim}: {check.detail}")
        if not proof.ok:
            raise CommandError("PROOF FAILED", returncode=1)
        self.stdout.write(
            self.style.SUCCESS("PROOF OK: one leader at a time, no tick twice, tokens only forward.")
        )

    # -- processes ---------------------------------------------------------------------------

    def start_workers(self, run, options, logs):
        env = {
            **os.environ,
            "SIMBA_EXAMPLE_LEASE": str(options["lease"]),
            "SIMBA_EXAMPLE_RENEW": str(options["renew"]),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("PYTEST_CURRENT_TEST", None)
        workers = {}
        for i in range(1, options["workers"] + 1):
            name = f"worker-{i}"
            log = logs / f"{name}.log"
            with log.open("w") as out:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        str(MANAGE_PY),
                        "demo_worker",
                        "--run",
                        run,
                        "--name",
                        name,
                        "--interval",
                        str(options["interval"]),
                    ],
                    env={**env, "SIMBA_EXAMPLE_WORKER": name},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            workers[name] = Worker(name, process, log)
        return workers

    def stop_workers(self, workers):
        alive = [w for w in workers.values() if w.process.poll() is None]
        for worker in alive:
            worker.process.send_signal(signal.SIGTERM)
        for worker in alive:
            try:
                worker.process.wait(10)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
        if alive:
            self.say(f"stopped {', '.join(w.name for w in alive)} (SIGTERM: they closed their sessions)")

    def say(self, text):
        self.stdout.write(f"[{time.monotonic() - self.started:5.1f}s] {text}")
        self.stdout.flush()
