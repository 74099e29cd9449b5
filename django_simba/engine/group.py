"""Groups: membership that lives exactly as long as the member's session.

``join()`` makes this process a member now and in every later session (the
engine rejoins after a session is replaced); ``leave()`` ends that. With
``on_change``, the group's members are watched: notified backends push changes,
and every backend is also polled once per renew interval, since a member whose
session expires may leave without any notification.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..spi import Member, Notification, NotificationKind, validate_name
from .callbacks import check_callback
from .config import check_seconds
from .runtime import Outcome

if TYPE_CHECKING:
    from .port import Port
    from .runtime import Timer

ChangeCallback = Callable[[list[Member]], Any]


class Group:
    """A handle on the group ``name``.

    ``port`` is the engine, or a callable returning it (resolved at each use, as a lock's is), so
    that a handle made while modules load reads no settings and starts nothing.
    """

    def __init__(
        self, port: Port | Callable[[], Port], name: str, *, on_change: ChangeCallback | None = None
    ) -> None:
        self._port = port
        self.name = validate_name(name)
        check_callback("on_change", on_change)
        self.on_change = on_change
        self._joined = False
        self._watching = False
        self._last_seen: tuple[str, ...] | None = None
        self._timer: Timer | None = None
        self._refreshing = False

    @property
    def port(self) -> Port:
        port = self._port
        return port() if callable(port) else port

    @property
    def joined(self) -> bool:
        return self._joined

    def join(self, timeout: float | None = None) -> None:
        """Become a member (idempotent for this handle). Waits for a session up to ``timeout``."""
        timeout = check_seconds("timeout", timeout)
        if self._joined:
            return
        wait = self.port.backend.timeout if timeout is None else timeout
        self.port.join(self.name, wait)
        self._joined = True

    def leave(self) -> None:
        if not self._joined:
            return
        self._joined = False
        self.port.leave(self.name)

    def members(self) -> list[Member]:
        """Live members, sorted by session id; never an expired session."""
        return self.port.members(self.name)

    def is_member(self) -> bool:
        session_id = self.port.session_id
        return session_id is not None and any(m.session_id == session_id for m in self.members())

    # -- change watching ---------------------------------------------------------------

    def watch(self) -> Group:
        """Start calling ``on_change(members)`` on every change (called by the engine's factory)."""
        if self.on_change is None or self._watching:
            return self
        self._watching = True
        self.port.start()
        self.port.add_notification_listener(self._on_notification)
        if self.port.backend.notifies:
            name = self.name
            self.port.submit(lambda: self.port.backend.watch_group(name), lambda _: None)
        self._refresh()
        return self

    def close(self) -> None:
        """Leave (if joined) and stop watching."""
        self._watching = False
        if self._timer is not None:
            self._timer.cancel()
        self.port.remove_notification_listener(self._on_notification)
        if self.port.backend.notifies and self.on_change is not None:
            name = self.name
            self.port.submit(lambda: self.port.backend.unwatch_group(name), lambda _: None)
        self.leave()

    def _on_notification(self, event: Notification) -> None:
        if event.kind is NotificationKind.RESYNC or (
            event.kind is NotificationKind.GROUP_CHANGED and event.name == self.name
        ):
            self._refresh()

    def _refresh(self) -> None:
        if not self._watching or self._refreshing:
            return
        self._refreshing = True
        self.port.submit(lambda: self.port.backend.members(self.name), self._on_members)

    def _on_members(self, outcome: Outcome[list[Member]]) -> None:
        self._refreshing = False
        if not self._watching:
            return
        members = outcome.value
        if members is not None:
            seen = tuple(m.session_id for m in members)
            if seen != self._last_seen:
                self._last_seen = seen
                on_change = self.on_change
                if on_change is not None:
                    self.port.run_callback(lambda: on_change(members))
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.port.call_later(self.port.config.renew_interval, self._refresh)

    def __repr__(self) -> str:
        return f"<Group {self.name!r} joined={self._joined}>"
