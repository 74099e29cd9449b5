"""The backend interface (SPI; docs/design.rst, "The backend interface").

A backend subclasses :class:`LeaseBackend` and implements the ``_``-prefixed
hooks. The public methods validate their arguments first, so a bad name is
rejected before any I/O on every backend alike.

Rules every implementation keeps (design: Rules): sessions expire once not kept
alive for their lease duration and are never revived; a lease belongs to a
session only while it is live; tokens are > 0, strictly increase with every
new term of a name and never reset; remaining times are durations on the
backend's clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .errors import ConfigurationError, NotSupported
from .names import validate_metadata, validate_name, validate_prefix
from .types import Grant, LeaseInfo, Member, Notification, OpenedSession, Released, Renewal, SessionInfo

NotificationListener = Callable[[Notification], None]

DEFAULT_TIMEOUT = 5.0
MAX_PURGE_LIMIT = 1000
#: The longest span of seconds anything accepts (a lease, a renew interval, a timeout, a maximum
#: hold): a year, beyond any lease or wait that means something, well within what clocks and
#: timers represent. ``django_simba.engine.config`` re-exports it for callers and settings.
MAX_SECONDS = 365 * 86400.0


@dataclass(frozen=True, slots=True)
class OptionsProblem:
    """What is wrong with a backend's ``OPTIONS`` (a clause), and how to fix it."""

    message: str
    hint: str


class LeaseBackend(ABC):
    """Storage of sessions, leases and group memberships.

    Capabilities are class attributes so the engine and the status tools can
    adapt without trying an operation first.
    """

    #: Pushes RELEASED / GROUP_CHANGED notifications to a subscribed listener.
    #: A backend without it is polled with a backoff (design: The backend interface).
    notifies: ClassVar[bool] = False
    #: A watched name costs nothing until it is released (a pub/sub channel), while setting a
    #: watch takes a round trip: the engine keeps watching a contended name between its waits.
    #: False where every change of a watched name costs requests (ZooKeeper's one-shot watches).
    idle_watches_are_free: ClassVar[bool] = False
    #: Keeps records of expired sessions until ``purge_expired`` removes them.
    needs_purge: ClassVar[bool] = False
    #: Short name used in logs, metrics and the status command.
    vendor: ClassVar[str] = "custom"
    #: A release gives the name straight to the session that has waited longest (see ``acquire``'s
    #: ``wait``) and says so in a HANDED_OVER notification. False: a release frees the name for all.
    hands_over: bool = False
    #: A term that ends any other way (its session expired, an operator freed it) is handed over
    #: too: waiters in the line need no RELEASED watch, so the engine sets none for them.
    hands_over_always: ClassVar[bool] = False
    #: Keeps its records in django-simba's own tables (``django_simba.models``), in the database
    #: :meth:`tables_alias` names: the admin lists their rows and the router sends the models there.
    uses_tables: ClassVar[bool] = False
    #: The system check that reports ``OPTIONS`` this backend refuses (:meth:`options_problems`).
    #: The built-in backends have E012 to E014; a backend of your own reports under E015.
    options_check_id: ClassVar[str] = "django_simba.E015"
    #: The longest ``lease_duration`` a session may be opened with: lower where the server's
    #: protocol cannot carry more (see :meth:`lease_duration_problem`).
    max_lease_duration: ClassVar[float] = MAX_SECONDS

    @classmethod
    def lease_duration_problem(cls, lease_duration: float) -> OptionsProblem | None:
        """Why this backend cannot open sessions of ``lease_duration`` seconds, or None.

        The settings checks (E004), :class:`~django_simba.engine.Engine` and every session call
        refuse what this refuses, with the accepted range in the message.
        """
        if 0 < lease_duration <= cls.max_lease_duration:  # False for nan
            return None
        bound = cls.max_lease_duration
        return OptionsProblem(
            f"lease_duration must be more than 0 and at most {bound:.0f} seconds ({_days(bound)}) on the "
            f"{cls.vendor} backend, not {lease_duration!r}",
            cls.lease_duration_hint(),
        )

    @classmethod
    def lease_duration_hint(cls) -> str:
        """How to fix a lease this backend refuses (the hint of the system check)."""
        return "Use a LEASE_DURATION such as the default, 15 seconds."

    @classmethod
    def _check_duration(cls, lease_duration: object) -> None:
        if isinstance(lease_duration, bool) or not isinstance(lease_duration, int | float):
            raise TypeError(f"lease_duration must be a number of seconds, not {lease_duration!r}")
        problem = cls.lease_duration_problem(lease_duration)
        if problem is not None:
            raise ValueError(problem.message)

    @classmethod
    def options_problems(
        cls, options: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT
    ) -> list[OptionsProblem]:
        """What is wrong with ``options``, found without I/O; empty when the backend takes them.

        The system checks report these, and the settings refuse them at run time, so the two
        never disagree. By default the backend is built as the engine builds it (a constructor
        validates its options and does no I/O) and closed again; override to check more.
        """
        try:
            backend = cls.build(options, timeout=timeout)
        except Exception as error:  # ConfigurationError, or a driver that cannot be loaded
            reason = (
                str(error) if isinstance(error, ConfigurationError) else f"{type(error).__name__}: {error}"
            )
            return [OptionsProblem(reason, getattr(error, "hint", None) or cls.options_hint())]
        backend.close()
        return []

    @classmethod
    def build(
        cls, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> LeaseBackend:
        """The backend for ``options``, as the settings' loader builds it: an instance of this class.

        A class that names a family of backends builds the member that serves ``options``
        (the database backend: the alias's vendor's).
        """
        return cls(options, timeout=timeout)

    @classmethod
    def options_hint(cls) -> str:
        """How to fix ``OPTIONS`` the constructor refused: the hint of the system check."""
        return "See the documentation of the backend class."

    @classmethod
    def tables_alias(cls, options: Mapping[str, Any]) -> str:
        """The database alias of django-simba's tables, for a backend that ``uses_tables``."""
        raise NotSupported(f"{cls.__name__} keeps no records in django-simba's tables")

    def __init__(self, options: Mapping[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        if not timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.options: Mapping[str, Any] = dict(options or {})
        #: Every call gives up after this many seconds with BackendTimeout.
        self.timeout = float(timeout)

    # -- sessions -----------------------------------------------------------------

    def open_session(self, lease_duration: float, metadata: str = "") -> OpenedSession:
        """Open a new session that lives ``lease_duration`` seconds unless kept alive."""
        self._check_duration(lease_duration)
        return self._open_session(float(lease_duration), validate_metadata(metadata))

    def keep_alive(self, session_id: str, lease_duration: float) -> Renewal:
        """Renew the session and, through it, every lease and membership it holds.

        Raises SessionExpired when the session is gone (and removes what is left of it).
        """
        self._check_duration(lease_duration)
        return self._keep_alive(session_id, float(lease_duration))

    def close_session(self, session_id: str) -> None:
        """Delete the session, free its leases (keeping tokens) and memberships. Idempotent."""
        self._close_session(session_id)

    # -- leases -------------------------------------------------------------------

    def acquire(self, session_id: str, name: str, *, wait: bool = False) -> Grant | None:
        """Take ``name`` when free or its holder expired; ``None`` when a live session holds it.

        Re-acquiring a name the session holds returns the same term.
        Raises SessionExpired when the caller's session is not live.

        ``wait`` says the caller will keep trying until it gets the name. A backend that
        ``hands_over`` then puts a refused session in the name's line: a release hands the name
        to the first live session of the line, with a new term that lasts as long as that
        session, and announces it (HANDED_OVER, naming the session and the token). The session
        leaves the line when it gets the name, or with ``stop_waiting``.
        """
        return self._acquire(session_id, validate_name(name), bool(wait))

    def stop_waiting(self, session_id: str, name: str) -> None:
        """Take the session out of ``name``'s line, if it is in it; a term already handed to it stays.

        No effect on a backend that does not hand names over.
        """
        validate_name(name)
        if self.hands_over:
            self._stop_waiting(session_id, name)

    def _stop_waiting(self, session_id: str, name: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} hands names over: it must implement _stop_waiting")

    def release(self, session_id: str, name: str, token: int | None = None) -> Released:
        """Free ``name`` if this session holds it (the token is kept); no effect otherwise.

        With ``token``, only that term is freed: a release that reaches the backend
        late (after its caller gave up on it) never frees a newer term of the session.

        The reply says whether the term was still held when the release arrived (a holder
        whose name an operator force-released learns it here), and, on the polled
        backends, whether another session was refused the name meanwhile: the engine then
        lets that session have the name first.
        """
        if token is not None and (isinstance(token, bool) or not isinstance(token, int) or token <= 0):
            raise ValueError(f"token must be a positive int or None, not {token!r}")
        released = self._release(session_id, validate_name(name), token)
        return released if isinstance(released, Released) else Released(contended=released)

    def owner(self, name: str) -> LeaseInfo | None:
        """The live holder of ``name``, or ``None``."""
        return self._owner(validate_name(name))

    def leases(self, prefix: str = "") -> list[LeaseInfo]:
        """Live holders of every lease whose name starts with ``prefix``, sorted by name."""
        return sorted(self._leases(validate_prefix(prefix)), key=lambda info: info.name)

    def force_release(self, name: str) -> bool:
        """Free ``name`` whoever holds it (operators only); True when a live holder lost it."""
        return self._force_release(validate_name(name))

    # -- groups -------------------------------------------------------------------

    def join(self, session_id: str, group: str) -> None:
        """Make the session a member of ``group`` for as long as it lives."""
        self._join(session_id, validate_name(group))

    def leave(self, session_id: str, group: str) -> None:
        self._leave(session_id, validate_name(group))

    def members(self, group: str) -> list[Member]:
        """Live members of ``group``, sorted by session id; never an expired session."""
        return sorted(self._members(validate_name(group)), key=lambda m: m.session_id)

    def groups(self, prefix: str = "") -> dict[str, list[Member]]:
        """Every group with a live member whose name starts with ``prefix`` (status tools)."""
        found = self._groups(validate_prefix(prefix))
        return {
            name: sorted(members, key=lambda m: m.session_id)
            for name, members in sorted(found.items())
            if members
        }

    # -- operations ---------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Sessions known to the backend, for status tools (expired ones have remaining <= 0)."""
        return sorted(self._sessions(), key=lambda s: s.session_id)

    def purge_expired(self, limit: int = MAX_PURGE_LIMIT) -> int:
        """Remove at most ``limit`` expired sessions (of crashed processes); return how many."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_PURGE_LIMIT:
            raise ValueError(f"limit must be an int from 1 to {MAX_PURGE_LIMIT}, not {limit!r}")
        return self._purge_expired(limit)

    # -- notifications (optional) ------------------------------------------------

    def subscribe(self, listener: NotificationListener) -> None:
        """Deliver notifications to ``listener`` (from any thread). No-op unless ``notifies``."""

    def watch_lease(self, name: str) -> None:
        """Ask for a RELEASED notification when ``name`` is released."""

    def unwatch_lease(self, name: str) -> None:
        """Stop notifications for ``name``."""

    def watch_group(self, group: str) -> None:
        """Ask for GROUP_CHANGED notifications of ``group`` (including its later creation)."""

    def unwatch_group(self, group: str) -> None:
        """Stop notifications for ``group``."""

    @property
    def notifying(self) -> bool:
        """True while notifications are being delivered; False means the engine must poll."""
        return False

    # -- the caller ---------------------------------------------------------------

    def check_caller(self) -> None:
        """Raise ConfigurationError when what the calling thread holds keeps every call of this
        backend from succeeding until the thread lets go (SQLite: its transaction holds the write
        lock of the tables' database). The engine asks before a caller waits for a session, which
        the keep-alive thread could then never open. No-op by default."""

    # -- lifecycle ----------------------------------------------------------------

    def after_fork(self) -> None:
        """In a forked child: forget connections inherited from the parent without closing them."""

    def close(self) -> None:
        """Release connections and threads. The backend may be used again afterwards."""

    # -- hooks for implementations ----------------------------------------------

    @abstractmethod
    def _open_session(self, lease_duration: float, metadata: str) -> OpenedSession: ...

    @abstractmethod
    def _keep_alive(self, session_id: str, lease_duration: float) -> Renewal: ...

    @abstractmethod
    def _close_session(self, session_id: str) -> None: ...

    @abstractmethod
    def _acquire(self, session_id: str, name: str, wait: bool) -> Grant | None: ...

    @abstractmethod
    def _release(self, session_id: str, name: str, token: int | None) -> Released | bool | None:
        """Return a :class:`Released`; a bare bool is read as its ``contended`` hint."""

    @abstractmethod
    def _owner(self, name: str) -> LeaseInfo | None: ...

    @abstractmethod
    def _leases(self, prefix: str) -> list[LeaseInfo]: ...

    @abstractmethod
    def _force_release(self, name: str) -> bool: ...

    @abstractmethod
    def _join(self, session_id: str, group: str) -> None: ...

    @abstractmethod
    def _leave(self, session_id: str, group: str) -> None: ...

    @abstractmethod
    def _members(self, group: str) -> list[Member]: ...

    @abstractmethod
    def _groups(self, prefix: str) -> dict[str, list[Member]]: ...

    @abstractmethod
    def _sessions(self) -> list[SessionInfo]: ...

    @abstractmethod
    def _purge_expired(self, limit: int) -> int: ...


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.0f} days" if days == round(days) else f"about {days:.1f} days"


__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_PURGE_LIMIT",
    "MAX_SECONDS",
    "LeaseBackend",
    "NotificationListener",
    "OptionsProblem",
]
