"""Nodes that no session of the backend made: never a holder, a waiter or a member.

A line's nodes are the sessions' ephemeral sequential nodes, ``{session id}-{sequence}``, and a
member node is ``{session id}``, an ephemeral of that session. Whoever the ACL of a line or a
group lets create can plant a node there with such a name: a persistent one (``ephemeralOwner``
0) would hold the name for ever and block every waiter behind it. A node is a session's only
when it is an ephemeral of the very session its name gives; any other is **foreign**: left out
of the line (nobody holds the name through it, nobody waits for it to go) and out of
``members``, and logged once at WARNING with its path, for the operator to delete it
(``deletall`` or ``delete`` in ``zkCli.sh``) and to close the ACL that let it in.

A verdict never changes (a node's owner is fixed at its creation), so it is kept: the foreign
nodes by line, the nodes found to be sessions', each up to ``REMEMBERED`` of them, the least
recently seen forgotten first. Thread-safe: callers' threads and kazoo's callbacks share it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

from . import line
from .layout import format_session_id

logger = logging.getLogger("django_simba.backends.zookeeper")

REMEMBERED = 4096


def is_sessions_line_node(child: str, stat: Any) -> bool:
    """``child`` (a line's node) is an ephemeral of the session its name gives."""
    owner = int(stat.ephemeralOwner)
    named = line.sequence_of(child) is not None
    return bool(owner) and named and line.session_of(child) == format_session_id(owner)


def is_sessions_member(child: str, stat: Any) -> bool:
    """``child`` (a group's member node) is an ephemeral of the session it is named after."""
    owner = int(stat.ephemeralOwner)
    return bool(owner) and child == format_session_id(owner)


class ForeignNodes:
    """What is known of the nodes met in lines and groups."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._foreign: OrderedDict[str, set[str]] = OrderedDict()  # directory -> its foreign children
        self._sessions: OrderedDict[str, None] = OrderedDict()  # paths of nodes found to be sessions'
        self._warned: OrderedDict[str, None] = OrderedDict()

    def in_line(self, directory: str) -> frozenset[str]:
        """The children of ``directory`` known to be foreign."""
        with self._lock:
            return frozenset(self._foreign.get(directory, ()))

    def known_sessions(self, directory: str, children: list[str]) -> bool:
        """Whether one of ``children`` is known to be a session's node."""
        with self._lock:
            return any(f"{directory}/{child}" in self._sessions for child in children)

    def judge_line_node(self, directory: str, child: str, stat: Any) -> bool:
        """Record what the ``stat`` of a line's node says; True when it is foreign."""
        return self._judge(directory, child, stat, is_sessions_line_node(child, stat), "lease line")

    def judge_member(self, directory: str, child: str, stat: Any) -> bool:
        """Record what the ``stat`` of a group's member node says; True when it is foreign."""
        return self._judge(directory, child, stat, is_sessions_member(child, stat), "group")

    def _judge(self, directory: str, child: str, stat: Any, sessions: bool, where: str) -> bool:
        path = f"{directory}/{child}"
        with self._lock:
            if sessions:
                _remember(self._sessions, path, None)
                return False
            foreign = self._foreign.get(directory)
            if foreign is None:
                foreign = set()
            _remember(self._foreign, directory, foreign)
            foreign.add(child)
            first = path not in self._warned
            _remember(self._warned, path, None)
        if first:
            owner = int(stat.ephemeralOwner)
            kind = "a persistent node" if not owner else f"an ephemeral of session {format_session_id(owner)}"
            logger.warning(
                "django-simba: ZooKeeper node %s is %s, no node of a session of this backend: it is "
                "ignored (never a holder, a waiter or a member); delete it, and close the ACL of the "
                "%s %s that let it in",
                path, kind, where, directory,
            )  # fmt: skip
        return True


def _remember(remembered: OrderedDict[str, Any], key: str, value: Any) -> None:
    remembered[key] = value
    remembered.move_to_end(key)
    if len(remembered) > REMEMBERED:
        remembered.popitem(last=False)
