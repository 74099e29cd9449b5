"""The engine TCK: a real threaded engine over a real backend, checked where engines went wrong.

:class:`~django_simba.testing.BackendTCK` checks what each backend call does; this kit checks
what the engine makes of those calls, their replies and their failures, on one backend: a
failed release whose term a keep-alive lists again, a name an operator force-released under
its holder, a maximum hold time, a close while threads wait, a leader that stops renewing. Use
it for a backend of your own like the backend TCK::

    from django_simba.testing import EngineTCK

    class TestMyBackendUnderTheEngine(EngineTCK):
        @pytest.fixture
        def backend(self):
            backend = MyBackend({"url": ...}, timeout=5)
            yield backend
            backend.close()

``other_backend`` is what a second process would use: by default the same backend object; a
backend with connections of its own per process should build a second one on the same storage.
Engines run with short timings (``lease_duration``, ``renew_interval``) and are closed after
each test. Tests use fresh, unique names, so they can share a server with other data.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..engine import EndReason, Engine, EngineConfig, Lock, Term, ThreadRuntime
from ..errors import BackendTimeout, EngineClosed, LeaseLost
from ..spi import Grant, LeaseBackend, OpenedSession, Released, Renewal
from ..spi.clock import local_clock
from .sharing_tck import STEADY_LEASE, SharedHandleTCK
from .waiting import wait_until

EngineFactory = Callable[..., Engine]


class EngineKit:
    """What the engine kits share: the backends of two processes, engines on threads, patience."""

    #: The engines' session lease and renew interval (seconds): short, to drive keep-alives.
    lease_duration: float = 1.0
    renew_interval: float = 0.25
    #: Slack on top of every bound a test checks: a loaded machine is slower, never faster.
    margin: float = 2.0
    #: Shown as the engines' session metadata.
    metadata: str = "engine-tck"

    @pytest.fixture
    def backend(self) -> Iterator[LeaseBackend]:  # pragma: no cover - provided by subclasses
        raise NotImplementedError("provide a 'backend' fixture")

    @pytest.fixture
    def other_backend(self, backend: LeaseBackend) -> LeaseBackend:
        """The backend another process would use, on the same storage as ``backend``."""
        return backend

    @pytest.fixture
    def make_engine(self) -> Iterator[EngineFactory]:
        """``make_engine(backend, **config)``: a started-on-use engine on threads, closed afterwards."""
        made: list[Engine] = []

        def make(backend: LeaseBackend, **config: Any) -> Engine:
            engine = Engine(backend, self.config(**config), ThreadRuntime())
            made.append(engine)
            return engine

        yield make
        for engine in made:
            engine.close()

    def config(self, **config: Any) -> EngineConfig:
        """The engines' configuration: the kit's timings and metadata, with ``config`` over them."""
        settings: dict[str, Any] = {
            "lease_duration": self.lease_duration,
            "renew_interval": self.renew_interval,
            "metadata": self.metadata,
            **config,
        }
        return EngineConfig(**settings)

    def patience(self) -> float:
        """How long to wait at most for something a few keep-alives bring about."""
        return self.lease_duration * 2 + self.margin * 2


class EngineTCK(EngineKit, SharedHandleTCK):
    """Engine conformance tests over the backend a subclass's ``backend`` fixture builds.

    They include :class:`~.sharing_tck.SharedHandleTCK`: one lock object shared by threads,
    tasks and a forked child.
    """

    @pytest.fixture
    def name(self) -> str:
        return f"etck.{uuid.uuid4().hex[:12]}"

    # -- the release reply the engine relies on ---------------------------------------------

    def test_a_release_says_the_live_term_was_held(self, backend: LeaseBackend, name: str) -> None:
        session = backend.open_session(30.0, "engine-tck").session_id
        try:
            grant = _granted(backend.acquire(session, name))
            assert backend.release(session, name, grant.token + 1).held is False  # not that term
            assert backend.release(session, name, grant.token).held is True
            assert backend.release(session, name, grant.token).held is False  # freed already
        finally:
            backend.close_session(session)

    def test_a_release_after_a_force_release_says_the_term_was_gone(
        self, backend: LeaseBackend, name: str
    ) -> None:
        session = backend.open_session(30.0, "engine-tck").session_id
        try:
            grant = _granted(backend.acquire(session, name))
            assert backend.force_release(name)
            assert backend.release(session, name, grant.token).held is False
        finally:
            backend.close_session(session)

    def test_a_release_after_the_session_expired_says_the_term_was_gone(
        self, backend: LeaseBackend, other_backend: LeaseBackend, name: str
    ) -> None:
        expired, taken = f"{name}.expired", f"{name}.taken"
        short = backend.open_session(self.lease_duration, "short").session_id
        tokens = {lease: _granted(backend.acquire(short, lease)).token for lease in (expired, taken)}
        taker = other_backend.open_session(30.0, "taker").session_id
        try:
            wait_until(
                lambda: other_backend.acquire(taker, taken) is not None,
                self.patience(),
                message="the expired session's lease taken over",
            )
            assert backend.release(short, taken, tokens[taken]).held is False  # another session's now
            wait_until(lambda: backend.owner(expired) is None, self.patience(), message="the lease expired")
            assert backend.release(short, expired, tokens[expired]).held is False  # nobody's
        finally:
            other_backend.close_session(taker)
            backend.close_session(short)

    # -- one grant gate ------------------------------------------------------------------------

    def test_a_term_whose_release_failed_is_never_granted_again(
        self,
        backend: LeaseBackend,
        make_engine: EngineFactory,
        name: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A release fails unapplied; while calls for the name keep failing, keep-alives list the
        old term as the session's again, with local waiters in line.

        The waiters must never get the old token (its holder may still write with it, and a
        fenced resource accepts a token equal to the highest it saw), and get newer ones once
        the calls work again; no two local terms ever share a token.
        """
        # Keep-alives as often as the kit's, under a lease they cannot miss on a loaded machine: a
        # session that lapsed would start over, and no keep-alive would list the old term again.
        engine = make_engine(backend, lease_duration=STEADY_LEASE)
        first = engine.lock(name)
        old = first.acquire(5)
        outage = _Outage(backend, name)
        renewals = _Renewals(backend.keep_alive)
        monkeypatch.setattr(backend, "release", outage.release)
        monkeypatch.setattr(backend, "acquire", outage.acquire)
        monkeypatch.setattr(backend, "keep_alive", renewals)
        first.release()  # fails on the backend: the engine ends the term here anyway
        assert outage.failed_releases >= 1
        waiters = [_Waiter(engine, name, timeout=self.patience() * 2) for _ in range(2)]
        wait_until(lambda: outage.failed_acquires, self.patience(), message="the waiters in line")
        relisted_from = renewals.count()

        def relisted(renewal: Renewal) -> bool:  # the backend still lists the old term as the session's
            return renewal.owned.get(name) == old.token

        after = renewals.wait_for(relisted, relisted_from, self.patience())
        renewals.wait_for(lambda renewal: True, after, self.patience())  # that reply was handled
        granted = [waiter.term.token for waiter in waiters if waiter.term is not None]
        assert not granted, f"granted {granted} while the old term #{old.token} could not be freed"
        outage.over = True
        terms = [waiter.result(self.patience() * 2) for waiter in waiters]
        tokens = [old.token, *(term.token for term in terms)]
        assert len(set(tokens)) == len(tokens), f"two local terms shared a token: {tokens}"
        assert min(tokens[1:]) > old.token, tokens

    # -- a release learns of a loss ----------------------------------------------------------

    def test_a_release_after_an_operator_force_released_the_name_raises_lease_lost(
        self, backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        # Renewals far apart: the release, not a keep-alive, is the first to learn of the loss.
        engine = make_engine(backend, lease_duration=30.0, renew_interval=10.0)
        lost: list[EndReason] = []
        lock = engine.lock(name, on_lost=lambda term, reason: lost.append(reason))
        term = lock.acquire(5)
        assert backend.force_release(name)
        with pytest.raises(LeaseLost) as raised:
            lock.release()
        assert raised.value.reason is EndReason.TAKEN and term.ended is EndReason.TAKEN
        assert not term.is_valid()
        wait_until(lambda: lost == [EndReason.TAKEN], self.patience(), message="on_lost called")

    def test_a_maximum_hold_time_ends_the_term_as_max_hold(
        self, backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        engine = make_engine(backend)
        lost: list[EndReason] = []
        lock = engine.lock(name, max_hold=0.2, on_lost=lambda term, reason: lost.append(reason))
        term = lock.acquire(5)
        wait_until(lambda: not term.is_valid(), self.patience(), message="the maximum hold time")
        assert term.ended is EndReason.MAX_HOLD
        wait_until(lambda: backend.owner(name) is None, self.patience(), message="the name freed")
        wait_until(lambda: lost == [EndReason.MAX_HOLD], self.patience(), message="on_lost called")
        with pytest.raises(LeaseLost) as raised:
            lock.release()  # the holder learns its work outlived the term
        assert raised.value.reason is EndReason.MAX_HOLD and raised.value.term is term

    # -- a server that grants less than asked -------------------------------------------------

    def test_keep_alives_follow_a_session_shorter_than_asked(
        self,
        backend: LeaseBackend,
        make_engine: EngineFactory,
        name: str,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """The backend grants 3 s where the engine asks for 8 (a server limit, as ZooKeeper's
        ``maxSessionTimeout``): renewing every 3.6 s, as the settings say, would let every term
        lapse at 3 s, again and again. Keep-alives follow the grant instead (every 3 * 3.6 / 8 =
        1.35 s), the term lives on across several grants, and the short grant is logged once.
        """
        caplog.set_level(logging.WARNING, logger="django_simba.engine")
        granted = 3.0
        short = _ShortGrants(backend, granted)
        for method in ("open_session", "keep_alive", "acquire"):
            monkeypatch.setattr(backend, method, getattr(short, method))
        engine = make_engine(backend, lease_duration=8.0, renew_interval=3.6)
        lost: list[EndReason] = []
        lock = engine.lock(name, on_lost=lambda term, reason: lost.append(reason))
        term = lock.acquire(5)
        session = term.session_id
        renewed_from = short.renewals.count()
        wait_until(  # four renewals: well past two grants, unless the term lapses first
            lambda: short.renewals.count() >= renewed_from + 4 or not term.is_valid(),
            4 * 3.6 + self.margin,
            message="four keep-alives answered",
        )
        assert term.is_valid() and not lost, f"the term lapsed ({term.ended}, {lost})"
        assert engine.session_id == session
        lock.release()
        logged = [r.getMessage() for r in caplog.records if "LEASE_DURATION asks for" in r.getMessage()]
        assert len(logged) == 1, logged
        assert "a session of 3 s where LEASE_DURATION asks for 8 s" in logged[0], logged[0]

    # -- close ---------------------------------------------------------------------------------

    def test_close_wakes_every_blocked_waiter_with_engine_closed(
        self,
        backend: LeaseBackend,
        other_backend: LeaseBackend,
        make_engine: EngineFactory,
        name: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        names = [f"{name}.{index}" for index in range(3)]
        holder = other_backend.open_session(30.0, "another process").session_id
        try:
            for held in names:
                _granted(other_backend.acquire(holder, held))
            refusals = _Refusals(backend.acquire)
            monkeypatch.setattr(backend, "acquire", refusals)
            engine = make_engine(backend)
            waiters = [_Waiter(engine, held, timeout=None) for held in names]
            # each was refused by the backend: it waits in line, with no timeout
            wait_until(lambda: refusals.refused >= set(names), self.patience(), message="all refused")
            engine.close()
            for waiter in waiters:
                error = waiter.error(self.patience())
                assert isinstance(error, EngineClosed), error
        finally:
            other_backend.close_session(holder)

    # -- take-over ----------------------------------------------------------------------------

    def test_a_leader_that_stops_renewing_is_replaced_in_time(
        self, backend: LeaseBackend, other_backend: LeaseBackend, make_engine: EngineFactory, name: str
    ) -> None:
        """The leader's process stops (its threads, not its session): the other candidate takes over
        within a lease plus a retry (half a renew interval, and its jitter), and only once the
        old leader's term is no longer valid there."""
        leader = make_engine(backend)
        first = leader.election(name)
        wait_until(lambda: first.is_leader, self.patience(), message="the first leader elected")
        old = first.term
        assert old is not None
        seen: list[tuple[Term, bool]] = []
        follower = make_engine(other_backend).election(
            name, on_elected=lambda term: seen.append((term, old.is_valid()))
        )
        leader.runtime.stop(5)  # no keep-alive from now on; the session is left to expire
        stopped = local_clock()
        bound = self.lease_duration + self.renew_interval * 0.75 + self.margin
        wait_until(lambda: seen, bound, message="the follower elected")
        took = local_clock() - stopped
        term, old_was_valid = seen[0]
        assert not old_was_valid, "the old leader's term was still valid when the new one was elected"
        assert term.token > old.token and follower.is_leader
        assert took <= bound, took


def _granted(grant: Grant | None) -> Grant:
    assert grant is not None, "the name was refused"
    return grant


class _Waiter:
    """A thread that waits for a lock of its own on ``name``, and releases it once it has it."""

    def __init__(self, engine: Engine, name: str, *, timeout: float | None) -> None:
        self.term: Term | None = None
        self._error: BaseException | None = None
        lock = engine.lock(name)
        self._thread = threading.Thread(target=self._run, args=(lock, timeout), daemon=True)
        self._thread.start()

    def _run(self, lock: Lock, timeout: float | None) -> None:
        try:
            self.term = lock.acquire(timeout)
            lock.release()
        except BaseException as error:  # reported to the test
            self._error = error

    def _finished(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"still waiting after {timeout:g} s"

    def result(self, timeout: float) -> Term:
        """The term it got, once it finished within ``timeout``; its error re-raised."""
        self._finished(timeout)
        if self._error is not None:
            raise self._error
        assert self.term is not None
        return self.term

    def error(self, timeout: float) -> BaseException | None:
        """What it failed with, once it finished within ``timeout``."""
        self._finished(timeout)
        return self._error


class _Outage:
    """Stands for ``backend.release`` and ``backend.acquire``: calls for ``name`` fail unapplied
    until the outage is ``over``."""

    def __init__(self, backend: LeaseBackend, name: str) -> None:
        self._release = backend.release
        self._acquire = backend.acquire
        self._name = name
        self.over = False
        self.failed_releases = 0
        self.failed_acquires = 0

    def release(self, session_id: str, name: str, token: int | None = None) -> Released:
        if not self.over and name == self._name:
            self.failed_releases += 1
            raise BackendTimeout(f"the release of {name!r} was lost on its way (engine TCK)")
        return self._release(session_id, name, token)

    def acquire(self, session_id: str, name: str, *, wait: bool = False) -> Grant | None:
        if not self.over and name == self._name:
            self.failed_acquires += 1
            raise BackendTimeout(f"the acquire of {name!r} was lost on its way (engine TCK)")
        return self._acquire(session_id, name, wait=wait)


class _Renewals:
    """Stands for ``backend.keep_alive``, and keeps every renewal the backend answered."""

    def __init__(self, keep_alive: Callable[[str, float], Renewal]) -> None:
        self._keep_alive = keep_alive
        self._answered: list[Renewal] = []
        self._changed = threading.Condition()

    def __call__(self, session_id: str, lease_duration: float) -> Renewal:
        renewal = self._keep_alive(session_id, lease_duration)
        with self._changed:
            self._answered.append(renewal)
            self._changed.notify_all()
        return renewal

    def count(self) -> int:
        with self._changed:
            return len(self._answered)

    def wait_for(self, matches: Callable[[Renewal], bool], after: int, timeout: float) -> int:
        """Wait for a renewal, among those answered after the first ``after``, that ``matches``.

        Returns how many renewals were answered up to the first that matched.
        """

        def found() -> int:
            answered = self._answered
            return next((at + 1 for at in range(after, len(answered)) if matches(answered[at])), 0)

        with self._changed:
            count = self._changed.wait_for(found, timeout)
        assert count, f"no keep-alive answered as expected within {timeout:g} s"
        return count


class _ShortGrants:
    """Stands for a backend's session calls, answering with at most ``granted`` seconds left.

    The backend keeps the session longer; the engine, told less, must renew sooner.
    """

    def __init__(self, backend: LeaseBackend, granted: float) -> None:
        self._granted = granted
        self._open = backend.open_session
        self._acquire = backend.acquire
        self._keep_alive = backend.keep_alive
        self.renewals = _Renewals(self._short_keep_alive)

    def _short_keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        renewal = self._keep_alive(session_id, lease_duration)
        return Renewal(min(renewal.remaining, self._granted), renewal.owned)

    def open_session(self, lease_duration: float, metadata: str = "") -> OpenedSession:
        opened = self._open(lease_duration, metadata)
        return OpenedSession(opened.session_id, min(opened.remaining, self._granted))

    def keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        return self.renewals(session_id, lease_duration)

    def acquire(self, session_id: str, name: str, *, wait: bool = False) -> Grant | None:
        grant = self._acquire(session_id, name, wait=wait)
        if grant is None:
            return None
        return Grant(grant.name, grant.token, min(grant.remaining, self._granted))


class _Refusals:
    """Stands for ``backend.acquire``, and notes the names it refused."""

    def __init__(self, acquire: Callable[..., Grant | None]) -> None:
        self._acquire = acquire
        self._mutex = threading.Lock()
        self._refused: set[str] = set()

    def __call__(self, session_id: str, name: str, *, wait: bool = False) -> Grant | None:
        grant = self._acquire(session_id, name, wait=wait)
        if grant is None:
            with self._mutex:
                self._refused.add(name)
        return grant

    @property
    def refused(self) -> set[str]:
        with self._mutex:
            return set(self._refused)
