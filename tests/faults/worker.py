"""A worker process of the real-fault tests: contends for one lock and writes a fenced register.

Run as ``python worker.py CONFIG.json run`` (or ``migrate`` to create the
database backend's tables once). The worker configures Django itself from the
JSON file, then loops: acquire the lock, hold it for a short random time while
writing token-stamped values to the register, release, pause. Every step goes
as one JSON line to its log file, stamped with ``time.monotonic()`` (one clock
for every process of the host, so the test can order events across workers).

Before each write the worker asks ``term.is_valid()``; once the term is no
longer valid it sends one last "late" write with its old token, as a write
already on its way would arrive, and the register must refuse it whenever a
newer holder wrote first. SIGTERM stops the loop and exits 0; SIGUSR1 dumps
every thread's stack to stderr (the test does so before killing a hung worker).
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: make ``tests.faults`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from django_simba.operations.wakeup import Wakeup
from tests.faults import register

#: No main-loop step may take this long; faulthandler then dumps the stacks (a hang).
HANG_SECONDS = 20.0


class EventLog:
    """JSON lines, one per event, flushed at once and safe to write from any thread."""

    def __init__(self, path: str, worker: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (lives as long as the process)
        self._lock = threading.Lock()
        self.worker = worker

    def __call__(self, event: str, **fields: Any) -> None:
        record = {"e": event, "t": time.monotonic(), "w": self.worker, "pid": os.getpid(), **fields}
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()


class LogToEvents(logging.Handler):
    """Library log records become events, so stderr keeps only crashes and stack dumps."""

    def __init__(self, log: EventLog) -> None:
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:  # django-simba's records carry their traceback as (masked) text only
                text += "\n" + record.exc_text
            self.log("log", level=record.levelname, logger=record.name, message=text)
        except Exception:
            self.handleError(record)


def configure_django(config: dict[str, Any]) -> None:
    import django
    from django.conf import settings

    simba = {
        "BACKEND": config["backend"],
        "OPTIONS": config["options"],
        "LEASE_DURATION": config["lease"],
        "RENEW_INTERVAL": config["renew"],
        "AUTOSTART": False,
        "METADATA": f"pid={os.getpid()} worker={config.get('worker', 'migrate')}",
    }
    if config.get("timeout") is not None:
        simba["TIMEOUT"] = config["timeout"]
    databases = config.get("databases") or {}
    for database in databases.values():
        if database["ENGINE"].endswith("postgresql"):
            # the test finds this worker's connections by this name, to terminate them
            database.setdefault("OPTIONS", {})["application_name"] = f"simba-fault-{os.getpid()}"
    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="django-simba-fault-worker",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES=databases,
        INSTALLED_APPS=["django_simba"],
        SIMBA=simba,
    )
    django.setup()


def migrate(config: dict[str, Any]) -> None:
    configure_django(config)
    from django.core.management import call_command

    call_command("migrate", "django_simba", verbosity=0)


class Worker:
    def __init__(self, config: dict[str, Any], stop: Wakeup) -> None:
        self.config = config
        self.name: str = config["lock"]
        self.id: str = config["worker"]
        self.log = EventLog(config["log"], self.id)
        self.random = random.Random(config["seed"])
        self.stop = stop
        self.register = register.connect(
            config["register"]["dsn"],
            config["register"]["schema"],
            application_name=f"simba-fault-register-{os.getpid()}",
        )
        self.writes = 0

    def run(self) -> None:
        import django_simba
        from django_simba import LeaseLost, LockTimeout, SimbaError, get_engine

        engine = get_engine()
        session = engine.wait_for_session(30)
        self.log("ready", session=session, backend=engine.backend.vendor)
        lock = django_simba.lock(
            self.name, on_lost=lambda term, reason: self.log("lost", token=term.token, reason=reason.value)
        )
        while not self.stop.is_set():
            faulthandler.dump_traceback_later(HANG_SECONDS, exit=False)
            called = time.monotonic()
            try:
                term = lock.acquire(self.config["acquire_timeout"])
            except LockTimeout:
                self.log("waiting", since=called)
                continue
            except SimbaError as error:
                self.log("error", step="acquire", kind=type(error).__name__, message=str(error))
                self.stop.wait(0.05)
                continue
            acquired = time.monotonic()
            valid = term.is_valid()
            owner = self._owner()  # the backend's view, asked while the term should be valid
            zk = self._zookeeper_client_id(engine, term.session_id)
            # the hold counts from the log line, and the line says when it ends: a test injecting
            # a fault into a holder picks one with enough of its hold ahead
            until = time.monotonic() + self.random.uniform(*self.config["hold"])
            self.log(
                "acquired",
                token=term.token,
                session=term.session_id,
                called=called,
                valid=valid,
                at=acquired,
                until=until,
                owner=owner,
                valid_after_owner=term.is_valid(),
                zk=zk,
            )
            self.hold(term, until)
            try:
                lock.release()
                self.log("released", token=term.token)
            except LeaseLost as lost:  # the release ended nothing: the term had ended on its own
                self.log("released", token=term.token, lost=lost.reason.value)
            except SimbaError as error:
                self.log("error", step="release", kind=type(error).__name__, message=str(error))
            self.stop.wait(self.random.uniform(*self.config["gap"]))
        faulthandler.cancel_dump_traceback_later()
        self.log("stopping")

    def hold(self, term: Any, until: float) -> None:
        """Write while the term is valid and the hold time lasts; a late write once it is not."""
        while True:
            checked = time.monotonic()  # taken before the check: the belief held at or after it
            if not term.is_valid():
                self.write(term.token, checked, valid=False, late=True)
                return
            if checked >= until or self.stop.is_set():
                return
            self.write(term.token, checked, valid=True, late=False)
            self.stop.wait(self.config["write_interval"])

    def write(self, token: int, checked: float, *, valid: bool, late: bool) -> None:
        self.writes += 1
        value = f"{self.id}:{token}:{self.writes}"
        sent = time.monotonic()
        accepted = register.write(self.register, self.name, token, value, self.id, late=late)
        self.log("write", token=token, checked=checked, sent=sent, valid=valid, late=late, accepted=accepted)

    def _owner(self) -> dict[str, Any] | None:
        """``django_simba.owner()`` of the lock: its token and the pid in its session's metadata."""
        import django_simba
        from django_simba import SimbaError

        try:
            info = django_simba.owner(self.name)
        except SimbaError as error:
            return {"error": f"{type(error).__name__}: {error}"}
        if info is None:
            return {"token": None, "pid": None}
        fields = dict(part.partition("=")[::2] for part in info.metadata.split())
        pid = fields.get("pid", "")
        return {"token": info.token, "pid": int(pid) if pid.isdigit() else None}

    @staticmethod
    def _zookeeper_client_id(engine: Any, session_id: str) -> list[Any] | None:
        """The ZooKeeper session id and password, so the test can expire the session from outside."""
        if engine.backend.vendor != "zookeeper":
            return None
        try:
            client_id = engine.backend._session(session_id).client.client_id
        except Exception:  # the session ended meanwhile: nothing to expire
            return None
        return None if client_id is None else [client_id[0], client_id[1].hex()]


def watch_parent(parent: int) -> None:
    """Exit when the test process is gone, so no worker outlives its test run."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    mode = sys.argv[2]
    faulthandler.enable(sys.stderr)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if mode == "migrate":
        migrate(config)
        return
    stop = Wakeup()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    worker = Worker(config, stop)

    def crashed(args: threading.ExceptHookArgs) -> None:
        worker.log("crash", thread=args.thread.name if args.thread else "", error=repr(args.exc_value))
        sys.__excepthook__(args.exc_type, args.exc_value, args.exc_traceback)  # type: ignore[arg-type]

    threading.excepthook = crashed
    handler = LogToEvents(worker.log)
    for name in ("django_simba", "kazoo"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO if name == "django_simba" else logging.WARNING)
    configure_django(config)
    try:
        worker.run()
    except BaseException as error:
        worker.log("crash", thread="main", error=repr(error))
        raise
    worker.log("stopped")


if __name__ == "__main__":
    main()
