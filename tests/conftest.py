"""Shared test configuration.

Under CI (``SIMBA_REQUIRE_SERVERS=1``, set by ``.ci/test``) a missing server fails
the test that needs it; in a developer's partial local run it is skipped instead.
Every test gets its tier's marker at collection (``tests/tiers.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests import tiers
from tests.clocks import Clock
from tests.servers.zookeeper import ZookeeperEnsemble, ZookeeperNode

# The suite caches compiled modules, whatever the machine says: with PYTHONDONTWRITEBYTECODE=1
# (common in containers) every pytest worker rewrote the tests and django_simba again, and each
# of the hundreds of processes the tests start compiled what it imports (the fast tier took
# 94 s instead of 66 s). The files go to __pycache__ directories, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the workers and the processes started later

REQUIRE_SERVERS = os.environ.get("SIMBA_REQUIRE_SERVERS") == "1"
#: A directory of the whole run, the same in every pytest-xdist worker (see :func:`run_directory`).
RUN_DIRECTORY = "SIMBA_TEST_RUN_DIRECTORY"


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background by a shell (`.ci/run &`), which ignores Ctrl-C for it: the
        # processes the tests start would inherit that and never see the Ctrl-C the tests send
        # them (Python installs its KeyboardInterrupt handler only where SIGINT is not ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(config, "workerinput"):  # the run's own process (xdist's controller, or the only one)
        # Named before xdist starts its workers, which inherit the variable; made on first use,
        # so that a run that fails to start leaves nothing behind.
        name = f"simba-run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.environ[RUN_DIRECTORY] = str(Path(tempfile.gettempdir()) / name)


def pytest_unconfigure(config: pytest.Config) -> None:
    named = os.environ.pop(RUN_DIRECTORY, None)
    if named and not hasattr(config, "workerinput"):
        directory = Path(named)
        stop_left_processes(directory)
        shutil.rmtree(directory, ignore_errors=True)


def run_directory() -> Path:
    """A directory shared by every process of this run (xdist's workers), removed at its end."""
    directory = Path(os.environ[RUN_DIRECTORY])
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


#: A process that may outlive the worker that started it (the sweep) writes its process group
#: in a file of this name under :func:`run_directory`, and removes it when it ends.
PROCESS_GROUP_FILE = "process-group"


def stop_left_processes(directory: Path) -> None:
    """SIGKILL the process groups still written under ``directory`` (an interrupted run left them)."""
    for written in directory.rglob(PROCESS_GROUP_FILE):
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(written.read_text()), signal.SIGKILL)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return True if tiers.not_collected(collection_path, config) else None


@pytest.hookimpl(tryfirst=True)  # before pytest's -m deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tiers.mark(items)


def server_missing(what: str) -> None:
    """Call from a fixture when a server is unreachable: skip locally, fail under CI."""
    if REQUIRE_SERVERS:
        pytest.fail(f"{what} is not reachable, and SIMBA_REQUIRE_SERVERS=1 requires it", pytrace=False)
    pytest.skip(f"{what} is not reachable")


@pytest.fixture
def clock() -> Clock:
    """A clock the test sets by hand (``tests/clocks.py``)."""
    return Clock()


@pytest.fixture
def own_redis() -> Generator[Any, None, None]:
    """A redis-server of this test's own (no persistence), for any suite's test that stops, pauses or
    reconfigures its server; stopped by PID afterwards."""
    from tests.servers.redis_cluster import need_redis_binaries, redis_server  # the redis extra

    need_redis_binaries()
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def _shared_redis_marked() -> None:
    """Mark the shared Redis database (``SIMBA_REDIS_URL``) as complete once per run, if it is up.

    A database the Redis backend never wrote to holds the first grant back for a lease, as after a
    data loss; the suites that use it (Django, deploy, task queues) must not wait for that.
    """
    try:
        import redis  # noqa: F401  (the redis extra)
    except ImportError:
        return
    from django_simba.spi import SimbaError
    from django_simba.testing.redis_fixtures import assume_nothing_lost

    url = os.environ.get("SIMBA_REDIS_URL", "redis://127.0.0.1:6379/15")
    with contextlib.suppress(SimbaError):  # not reachable: the tests that need it say so themselves
        assume_nothing_lost(url, timeout=2)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used a ZooKeeper server reports the end of that server's log.

    The servers' directories are temporary, so without this a stall seen once in CI leaves nothing
    to read.
    """
    report = yield
    if report.failed:
        for node in _zookeeper_nodes(getattr(item, "funcargs", {}).values()):
            report.sections.append((f"ZooKeeper node {node.node_id} ({node.hosts}) log", node.log_tail(6000)))
    return report


def _zookeeper_nodes(values: Any) -> list[ZookeeperNode]:
    nodes: list[ZookeeperNode] = []
    for value in values:
        if isinstance(value, ZookeeperNode):
            nodes.append(value)
        elif isinstance(value, ZookeeperEnsemble):
            nodes.extend(value.nodes)
    return nodes
