"""The single-node store: every operation is one script call, so one round trip.

A keep-alive renews the session and, through its lease index, every lease it holds,
in one script however many leases there are: on a single node a script may reach the
lease keys it reads from the index (see ``scripts.py``). Acquire is atomic here, so
a keep-alive can never run between an acquire's check of the session and its grant.
The database has one marker (``lua/_marker.lua``), which the grant paths read and keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ...spi import Grant, LeaseInfo, Member, Released, Renewal, SessionExpired
from .guards import require_replicas
from .holdback import HELD_BACK, HoldBacks, at_keep_alive
from .keys import (
    MARKER_KEY,
    group_key,
    lease_key,
    line_key,
    session_groups_key,
    session_key,
    session_keys,
    session_leases_key,
)
from .scripting import StandaloneScripting
from .scripts import (
    MARK,
    STANDALONE_ACQUIRE,
    STANDALONE_CLOSE,
    STANDALONE_JOIN,
    STANDALONE_KEEP_ALIVE,
    STANDALONE_LEASES_READ,
    STANDALONE_LEAVE,
    STANDALONE_MEMBERS,
    STANDALONE_RELEASE,
    Script,
)
from .store import BaseStore, released, seconds

EXPIRED, REFUSED, HELD, NEW_TERM = -1, 0, 1, 2


class StandaloneStore(BaseStore):
    scripting: StandaloneScripting

    def __init__(
        self,
        scripting: StandaloneScripting,
        *,
        timeout: float,
        wait_replicas: int = 0,
        hand_over: bool = True,
    ) -> None:
        super().__init__(scripting, timeout=timeout)
        self.wait_replicas = wait_replicas
        #: Releases hand the name to the first waiting session (see ``LeaseBackend.hands_over``).
        self.hand_over = hand_over
        self.hold_backs = HoldBacks()

    @property
    def where(self) -> str:
        """The server, as the data-loss warning names it."""
        return f"Redis {self.scripting.address}"

    def keep_alive(self, session_id: str, lease_ms: int) -> Renewal:
        keys = [*session_keys(session_id), MARKER_KEY]
        # On the session's own connection: never behind the callers' calls (see run_for_session).
        reply, acknowledged = self.scripting.run_for_session(
            STANDALONE_KEEP_ALIVE, keys, [session_id, lease_ms], self.wait_replicas, self._wait_ms()
        )
        live = int(reply[0]) == 1
        held_back = int(reply[2] if live else reply[1])
        if held_back > 0:  # the server lost its data within a lease: this session, or its terms, too
            self.hold_backs.held_back(self.where, held_back, at_keep_alive(session_id, live=live))
        if not live:
            raise SessionExpired(session_id)
        require_replicas(
            acknowledged,
            self.wait_replicas,
            f"the renewal of session {session_id}",
            "the keep-alive counts as failed (the primary keeps the leases longer, which is harmless)",
        )
        owned = {name: int(token) for name, token in zip(reply[3::2], reply[4::2])}
        return Renewal(seconds(reply[1]), owned)

    def close_session(self, session_id: str) -> None:
        self.scripting.run(STANDALONE_CLOSE, session_keys(session_id), [session_id])

    def acquire(self, session_id: str, name: str, wait: bool = False) -> Grant | None:
        keys = [
            session_key(session_id),
            session_leases_key(session_id),
            lease_key(name),
            line_key(name),
            MARKER_KEY,
        ]
        args: list[str | int] = [session_id, name, int(wait and self.hand_over), int(self.wait_replicas > 0)]
        reply, acknowledged = self._run(STANDALONE_ACQUIRE, keys, args)
        status = int(reply[0])
        if status == EXPIRED:
            raise SessionExpired(session_id)
        if status == REFUSED:
            return None
        if status == HELD_BACK:
            self.hold_backs.held_back(self.where, int(reply[1]))
            return None
        token, remaining = int(reply[1]), seconds(reply[2])
        if acknowledged < self.wait_replicas:
            if status == NEW_TERM:
                self._release(session_id, name, token)
                require_replicas(
                    acknowledged, self.wait_replicas, f"the new term of {name!r}", "it was given back"
                )
            # held already: its remaining time may come from a renewal the replicas did not acknowledge
            require_replicas(
                acknowledged,
                self.wait_replicas,
                f"the term of {name!r}",
                "its remaining time is not confirmed",
            )
        return Grant(name, token, remaining)

    def _run(self, script: Script, keys: Sequence[str], args: Sequence[str | int]) -> tuple[Any, int]:
        """Run ``script``; with ``wait_replicas``, then WAIT for its writes: (reply, replicas that acked).

        WAIT counts the writes of the connection it is sent on: it goes in the same pipeline, still
        one round trip. Replication is one ordered stream, so it also covers every write the primary
        made before the script's own; a script that vouches for older writes therefore writes
        something itself (keep-alive and join always do; acquire does when it reports a held term).
        """
        if not self.wait_replicas:
            return self.scripting.run(script, keys, args), 0
        return self.scripting.run_then_wait(script, keys, args, self.wait_replicas, self._wait_ms())

    def _wait_ms(self) -> int:
        """How long WAIT waits for the replicas: half the call's timeout."""
        return max(1, int(self.timeout * 500))

    def release(self, session_id: str, name: str, token: int = 0) -> Released:
        return released(self._release(session_id, name, token))

    def _release(self, session_id: str, name: str, token: int) -> Any:
        keys = [lease_key(name), session_leases_key(session_id), line_key(name), MARKER_KEY]
        return self.scripting.run(STANDALONE_RELEASE, keys, [session_id, name, token, int(self.hand_over)])

    def mark(self, hold_back_ms: int) -> int:
        """Begin an epoch where the marker is missing or stale, holding new terms back that long."""
        return int(self.scripting.run(MARK, [MARKER_KEY], [hold_back_ms]))

    def stop_waiting(self, session_id: str, name: str) -> None:
        self.scripting.command("ZREM", line_key(name), session_id)

    def owner(self, name: str) -> LeaseInfo | None:
        rows = self.scripting.run(STANDALONE_LEASES_READ, [lease_key(name)])
        if not rows:
            return None
        _, holder, token, remaining, metadata = rows[0]
        return LeaseInfo(name, holder, int(token), seconds(remaining), metadata)

    def join(self, session_id: str, group: str) -> None:
        keys = [session_key(session_id), session_groups_key(session_id), group_key(group)]
        added, acknowledged = self._run(STANDALONE_JOIN, keys, [session_id, group])
        if int(added) == EXPIRED:
            raise SessionExpired(session_id)
        if acknowledged < self.wait_replicas:
            if int(added):
                self.leave(session_id, group)  # only what this call began: another joiner's membership stays
            require_replicas(acknowledged, self.wait_replicas, f"the membership of {group!r}", "not joined")

    def leave(self, session_id: str, group: str) -> None:
        keys = [session_groups_key(session_id), group_key(group)]
        self.scripting.run(STANDALONE_LEAVE, keys, [session_id, group])

    def members(self, group: str) -> list[Member]:
        reply = self.scripting.run(STANDALONE_MEMBERS, [group_key(group)])
        return [Member(sid, metadata) for sid, metadata in zip(reply[0::2], reply[1::2])]

    def _partition(self, names: Iterable[str], key_of: Any) -> list[list[str]]:
        return [list(names)]  # one keyspace: any keys go together
