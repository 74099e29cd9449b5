"""Where one session stands in the lines of names (``line.py``): the state, without any I/O.

Each node the session created in a line is in one of three states until it is gone:

* held: first in its line, the name is the session's, with the node's czxid as token;
* waiting: further back, with the watches it set on nodes ahead of it (``Watch``);
* leaving: being deleted (released, left, refused, or a stray a keep-alive found), until
  ZooKeeper confirms it is gone. A delete that failed (a connection loss, a timeout) is sent
  again, and a leaving node is never taken for a held one again: reported as held, it would
  hand the token of a term already given back to the next holder of the name.

Beside them: the names with a create on its way (a keep-alive that lists such a node must not
take it for a lost create) and the names whose line is known to exist.

Order comes from the sequence numbers of ``ZkSession.send``: ZooKeeper answers one session's
requests in the order they were queued, so a listing says something of a node only when it was
sent after the request that created or deleted it. ``Places`` is thread-safe (callers' threads
and kazoo's watch callbacks change it); it does no I/O and calls nothing outside itself.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Container, Mapping
from dataclasses import dataclass

WATCHED_AHEAD = 4  # see Watch
LINES_REMEMBERED = 4096  # names whose line is known to exist: their acquire does not create it


@dataclass(frozen=True, slots=True)
class Node:
    """One of the session's nodes in a name's line."""

    name: str
    path: str
    token: int  # its czxid
    seq: int  # sequence number of its create (of the listing that found it, for a lost create)


@dataclass(slots=True)
class Watch:
    """The watches a waiting node set on nodes ahead of it in line.

    A waiter watches every node ahead of it while they are few (``WATCHED_AHEAD``): when the
    last of them goes, the name is ours, since no node can join a line ahead of ours, and no
    request is needed to know it. Further back it watches only the node just ahead, and lists
    the line again when that one goes, so that one release wakes a few waiters at most.
    """

    node: Node
    ahead: set[str]  # watched nodes not seen gone yet
    whole: bool  # the watched nodes are all the nodes that were ahead


@dataclass(slots=True)
class _Leaving:
    node: Node
    sent: int = 0  # sequence number of the latest delete sent for it (0: none yet)
    failed: bool = False  # that delete failed: send it again
    term: bool = False  # a released term's node (not a waiter's, nor a stray)


class _Creating:
    """``with places.creating(name)``: a class, not a generator context manager (every acquire makes one)."""

    __slots__ = ("name", "places")

    def __init__(self, places: Places, name: str) -> None:
        self.places = places
        self.name = name

    def __enter__(self) -> None:
        self.places._start_creating(self.name)

    def __exit__(self, *exc_info: object) -> None:
        self.places._stop_creating(self.name)


class Place(enum.Enum):
    """Where a node stands once its line was listed."""

    HELD = "first in line: the name is ours"
    WAITING = "further back, staying in line"
    REFUSED = "further back, and not waiting: now leaving, to be deleted"
    GONE = "not in the line any more, or no longer ours to place"
    ENDED = "the session ended"


class Found(enum.Enum):
    """What becomes of a node a keep-alive found that nobody here knew of (a lost create)."""

    KNOWN = "known by now, or the session ended: nothing to do"
    HELD = "first in its line: held"
    STRAY = "behind another node, or the name is held already: now leaving, to be deleted"


class Places:
    """The session's held, waiting and leaving nodes, the creates on their way, the lines seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Node] = {}  # by name
        self._waiting: dict[str, Node] = {}  # by name
        self._watches: dict[str, Watch] = {}  # by name: the latest watch set for a waiting node
        self._leaving: dict[str, _Leaving] = {}  # by path
        self._creating: dict[str, int] = {}  # names with creates on their way, how many
        self._lines_seen: OrderedDict[str, None] = OrderedDict()  # most recently used last
        self._closed = False

    def close(self) -> None:
        """The session ended: it holds and waits for nothing, and its nodes go with it."""
        with self._lock:
            self._closed = True
            self._held.clear()
            self._waiting.clear()
            self._watches.clear()
            self._leaving.clear()

    # -- reading --------------------------------------------------------------------------

    def mine(self, name: str) -> Node | None:
        """The session's node holding ``name`` or waiting for it."""
        with self._lock:
            return self._held.get(name) or self._waiting.get(name)

    def owned(self) -> dict[str, int]:
        with self._lock:
            return {name: node.token for name, node in self._held.items()}

    def knows_line(self, name: str) -> bool:
        with self._lock:
            return name in self._lines_seen

    def forget_line(self, name: str) -> None:
        """The line is being deleted: the next acquire makes it again."""
        with self._lock:
            self._lines_seen.pop(name, None)

    # -- joining a line -------------------------------------------------------------------

    def creating(self, name: str) -> _Creating:
        """Around a create for ``name``: a listing meanwhile leaves its node to the creator."""
        return _Creating(self, name)

    def _start_creating(self, name: str) -> None:
        with self._lock:
            self._creating[name] = self._creating.get(name, 0) + 1

    def _stop_creating(self, name: str) -> None:
        with self._lock:
            self._creating[name] -= 1
            if not self._creating[name]:
                del self._creating[name]

    def joined(self, node: Node) -> None:
        """A create's reply: the node waits until a listing says where it stands."""
        with self._lock:
            if self._closed:
                return
            self._waiting[node.name] = node
            self._lines_seen[node.name] = None
            self._lines_seen.move_to_end(node.name)
            if len(self._lines_seen) > LINES_REMEMBERED:
                self._lines_seen.popitem(last=False)

    def take_place(self, node: Node, ahead: list[str] | None, wait: bool) -> Place:
        """Place ``node`` given the nodes ``ahead`` of it in a listing (``None``: not listed)."""
        with self._lock:
            if self._closed:
                return Place.ENDED
            mine = self._held.get(node.name) is node or self._waiting.get(node.name) is node
            if ahead is None or not mine:
                self._drop(node)
                return Place.GONE
            if not ahead:
                self._drop(node)
                self._held[node.name] = node
                return Place.HELD
            if wait:
                return Place.WAITING
            self._drop(node)
            self._leaving[node.path] = _Leaving(node)
            return Place.REFUSED

    def drop(self, node: Node) -> None:
        """Forget ``node``: deleted by someone else."""
        with self._lock:
            self._drop(node)

    def _drop(self, node: Node) -> None:
        for nodes in (self._held, self._waiting):
            if nodes.get(node.name) is node:
                del nodes[node.name]
        if (watch := self._watches.get(node.name)) is not None and watch.node is node:
            del self._watches[node.name]

    # -- waiting --------------------------------------------------------------------------

    def watch(self, node: Node, ahead: list[str]) -> tuple[Watch, list[str]] | None:
        """Record the watch a waiting node sets on ``ahead``: it and the nodes to watch.

        ``None`` when there is nothing to send: the node no longer waits, or the watches set
        last time on the same nodes still stand.
        """
        watched = ahead if len(ahead) <= WATCHED_AHEAD else ahead[-1:]
        watch = Watch(node, set(watched), whole=len(watched) == len(ahead))
        with self._lock:
            if self._closed or self._waiting.get(node.name) is not node:
                return None
            if self._watches.get(node.name) == watch:
                return None
            self._watches[node.name] = watch
        return watch, watched

    def is_waiting(self, node: Node) -> bool:
        with self._lock:
            return self._waiting.get(node.name) is node

    def watch_spent(self, watch: Watch) -> None:
        """One of the watch's nodes changed: its watches must be set again after a look."""
        with self._lock:
            if self._watches.get(watch.node.name) is watch:
                del self._watches[watch.node.name]

    def ahead_gone(self, watch: Watch, child: str) -> bool:
        """Count ``child`` gone; True when it was the last of the watch's nodes.

        A watch set before the line was looked at again, or a node already counted, counts for
        nothing.
        """
        with self._lock:
            if self._watches.get(watch.node.name) is not watch or child not in watch.ahead:
                return False
            watch.ahead.discard(child)
            return not watch.ahead

    def hand_over(self, node: Node) -> bool:
        """Nobody is left ahead of the waiting ``node``: it holds the name. False if it left."""
        with self._lock:
            if self._closed or self._waiting.get(node.name) is not node:
                return False
            del self._waiting[node.name]
            self._watches.pop(node.name, None)
            self._held[node.name] = node
            return True

    def after_reconnection(self) -> list[Node]:
        """kazoo dropped every watch with the connection: the waiting nodes, to look again."""
        with self._lock:
            self._watches.clear()
            return list(self._waiting.values())

    # -- leaving --------------------------------------------------------------------------

    def stop_waiting(self, name: str) -> Node | None:
        """The node waiting for ``name``, now leaving; ``None`` if there is none."""
        with self._lock:
            node = self._waiting.pop(name, None)
            self._watches.pop(name, None)
            if node is None or self._closed:
                return None
            self._leaving[node.path] = _Leaving(node)
            return node

    def release(self, name: str, token: int | None) -> Node | None:
        """The node to delete to end ``name``'s term (with ``token``, that term), or ``None``.

        A held node becomes leaving; a term whose delete failed before is deleted again (a
        waiter's node whose delete failed is not a term: keep-alives and acquires finish it).
        """
        with self._lock:
            node = self._held.get(name)
            if node is not None and token in (None, node.token):
                del self._held[name]
                self._leaving[node.path] = _Leaving(node, term=True)
                return node
            return next(
                (
                    leaving.node
                    for leaving in self._leaving.values()
                    if leaving.failed
                    and leaving.term
                    and leaving.node.name == name
                    and token in (None, leaving.node.token)
                ),
                None,
            )

    def to_delete_again(self, name: str | None = None) -> list[str]:
        """The leaving nodes (of ``name``'s line) whose delete failed."""
        with self._lock:
            return [
                path
                for path, leaving in self._leaving.items()
                if leaving.failed and name in (None, leaving.node.name)
            ]

    def delete_sent(self, path: str, seq: int) -> None:
        with self._lock:
            if (leaving := self._leaving.get(path)) is not None:
                leaving.sent, leaving.failed = seq, False

    def delete_failed(self, path: str) -> None:
        """The delete's outcome is unknown (maybe applied, maybe not): a later listing tells."""
        with self._lock:
            if (leaving := self._leaving.get(path)) is not None:
                leaving.failed = True

    def deleted(self, path: str) -> None:
        with self._lock:
            self._leaving.pop(path, None)

    def settle(self, listed: Container[str], seq: int, name: str | None = None) -> None:
        """What a listing sent as request ``seq`` says of the leaving nodes (of ``name``'s line).

        A node whose delete went before the listing is gone when not listed; still listed, that
        delete failed, and the node stays leaving until one succeeds.
        """
        with self._lock:
            self._settle(listed, seq, name)

    def _settle(self, listed: Container[str], seq: int, name: str | None) -> None:
        for path, leaving in list(self._leaving.items()):
            if name in (None, leaving.node.name) and 0 < leaving.sent < seq:
                if path in listed:
                    leaving.failed = True
                else:
                    del self._leaving[path]

    # -- what a keep-alive finds ----------------------------------------------------------

    def reconcile(self, listed: Mapping[str, str], seq: int) -> list[tuple[str, str]]:
        """What a listing of every node the session owns, sent as request ``seq``, says.

        ``listed`` maps each path to its name. A held or waiting node created before the listing
        and not in it was deleted (released or force released); leaving nodes are settled.
        Returns the listed ``(path, name)`` nobody here knows of and no create is on its way for:
        creates whose reply was lost.
        """
        with self._lock:
            if self._closed:
                return []
            for nodes in (self._held, self._waiting):
                for node in list(nodes.values()):
                    if node.seq < seq and node.path not in listed:
                        self._drop(node)
            self._settle(listed, seq, None)
            known = self._known_paths()
            return [
                (path, name)
                for path, name in listed.items()
                if path not in known and name not in self._creating
            ]

    def found(self, node: Node, first: bool) -> Found:
        """Take in a node of a lost create, ``first`` in its line or not."""
        with self._lock:
            if self._closed or node.path in self._known_paths():
                return Found.KNOWN
            if first and node.name not in self._held:
                self._held[node.name] = node
                return Found.HELD
            self._leaving[node.path] = _Leaving(node)
            return Found.STRAY

    def _known_paths(self) -> set[str]:
        held_or_waiting = {node.path for nodes in (self._held, self._waiting) for node in nodes.values()}
        return held_or_waiting | self._leaving.keys()
