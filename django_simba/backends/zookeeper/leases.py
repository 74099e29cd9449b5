"""A session's leases: its requests on names' lines, and what it learns from their replies.

A session's place in a name's line is an ephemeral sequential node (``line.py``); where each of
its nodes stands is kept in ``places.py``.

* ``acquire`` sends, back to back in one round trip, the create of the session's node and a
  listing of the line. First in line: the name is held, with the node's czxid as token. Not first:
  a caller that does not wait deletes its node again; one that waits stays in line, watching the
  nodes ahead of it (``places.Watch``). Once none is left, the name is ours, without asking: no
  node can join a line ahead of ours. It is announced as HANDED_OVER, and nobody else is woken.
* ``release`` deletes the term's own node, a path no other term ever has: one request, and no
  way to delete a newer holder's node, whoever else deleted or created what meanwhile. A delete
  that failed is sent again ahead of the next keep-alive's requests, ahead of the next acquire
  of that name, or by a release of that term asked again, until one succeeds. The reply says
  whether the term was still the session's: the delete removed the node, or found none (an
  operator force-released it); after a failed delete, ``answers.py`` tells which.
* The nodes a keep-alive found that nobody here knew of (creates whose reply was lost) go to
  ``adopt_lost_creates``: it looks at each, holds it when first in line, deletes it otherwise.
* A node in a line that no session made (``foreign.py``) counts for nothing: a try is refused
  only once a session's node is known to be ahead (the first time a node of another session is
  met, a look at it, in one more round trip), and a waiter's watches take a foreign node ahead
  for a gone one.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from ...spi import (
    BackendUnavailable,
    Grant,
    Notification,
    NotificationKind,
    Released,
    SessionExpired,
    UnsafeAcl,
)
from . import line, requests
from .answers import ReleaseAnswers
from .errors import Deadline
from .idle import IdleNodes
from .places import WATCHED_AHEAD, Found, Node, Place, Watch
from .requests import Request, Sent

if TYPE_CHECKING:
    from .session import LayoutPreparer, ZkSession

logger = logging.getLogger("django_simba.backends.zookeeper")

_CREATE_ATTEMPTS = 4  # a node can vanish between our create and our look at it; retry a few times


class _NodeGone(Exception):
    """The session's node is no longer in its line (deleted by someone, or left meanwhile)."""


class Leases:
    """The lease side of one ``ZkSession``."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.places = session.places
        self.layout = session.layout
        self.answers = ReleaseAnswers()
        self.idle = IdleNodes()

    # -- acquire --------------------------------------------------------------------------

    def acquire(
        self, name: str, deadline: Deadline, prepare_layout: LayoutPreparer, *, wait: bool = False
    ) -> Grant | None:
        self.session.ensure_live(deadline)
        self.idle.touched(name)
        mine = self.places.mine(name)
        if mine is not None:
            directory = self.layout.lease(name)
            (listing,) = self.send_after_failed_deletes(name, requests.children(directory))
            try:
                children = self.session.wait(listing, deadline, f"listing {directory}")
            except NoNodeError:
                children = []
            self._settle(name, children, listing)
            with contextlib.suppress(_NodeGone):
                return self._take_place(mine, children, wait, deadline)
        for _ in range(_CREATE_ATTEMPTS):
            try:  # not contextlib.suppress: every acquire comes here
                return self._join_line(name, wait, deadline, prepare_layout)
            except _NodeGone:
                pass
        raise BackendUnavailable(f"the line of {name!r} kept disappearing under us")

    def _join_line(
        self, name: str, wait: bool, deadline: Deadline, prepare_layout: LayoutPreparer
    ) -> Grant | None:
        """Create the session's node in ``name``'s line and list the line, in one round trip."""
        session = self.session
        directory = self.layout.lease(name)
        acl = session.security.acl_for(directory)
        prefix = f"{directory}/{line.node_prefix(session.session_id)}"
        data = session.session_id.encode()
        # likely a new line: create it first, in the same round trip (if it exists already, the
        # failed create costs only that request; its reply is not needed)
        new_line = [] if self.places.knows_line(name) else [requests.create_container(directory, acl)]
        # the first time this backend meets the line, its ACL too (acls.py)
        look = [requests.acls(directory)] if session.guard.needs_check(directory) else []
        with self.places.creating(name):
            *_, created, listing = sent = self.send_after_failed_deletes(
                name,
                *new_line,
                *look,
                requests.create(prefix, data, acl, sequence=True),
                requests.children(directory),
            )
            try:
                path, stat = session.wait(created, deadline, f"joining the line of {name!r}")
            except NoNodeError:
                self._create_line(directory, acl, deadline, prepare_layout)
                raise _NodeGone from None
            session.check_own(stat)
            node = Node(name, path, stat.czxid, created.seq)
            self.places.joined(node)
            children = session.wait(listing, deadline, f"listing {directory}")
            self._settle(name, children, listing)
        if look:
            self._check_line_acl(name, sent[-3], deadline)
        return self._take_place(node, children, wait, deadline)

    def _check_line_acl(self, name: str, looked: Sent, deadline: Deadline) -> None:
        """Leave the line, and raise ``UnsafeAcl``, when its ACL is broader than configured."""
        session = self.session
        directory = self.layout.lease(name)
        try:
            stored, _ = session.wait(looked, deadline, f"reading the ACL of {directory}")
            session.guard.check(directory, stored)
        except NoNodeError:
            return  # gone and made again meanwhile: looked at next time
        except UnsafeAcl:
            self.stop_waiting(name, deadline)
            raise
        session.guard.sound(directory)

    def _create_line(
        self, directory: str, acl: list[Any], deadline: Deadline, prepare_layout: LayoutPreparer
    ) -> None:
        (created,) = self.session.send(requests.create_container(directory, acl))
        try:
            self.session.wait(created, deadline, f"creating {directory}")
        except NodeExistsError:
            pass
        except NoNodeError:
            prepare_layout(self.session.client, deadline)  # someone deleted our parent nodes

    def _take_place(self, node: Node, children: list[str], wait: bool, deadline: Deadline) -> Grant | None:
        """Where ``node`` stands in ``children``: the grant, or ``None`` (refused)."""
        ahead = self._ahead_of(node, children)
        if ahead and not wait:
            ahead = self._vetted(node, ahead, deadline)
        place = self.places.take_place(node, ahead, wait)
        if place is Place.ENDED:
            raise SessionExpired(self.session.session_id)
        if place is Place.GONE:
            raise _NodeGone
        if place is Place.HELD:
            return Grant(node.name, node.token, self.session.remaining())
        if place is Place.WAITING and ahead:
            self._watch(node, ahead)
        elif place is Place.REFUSED:
            self._delete(node.path, deadline)
        return None

    def _ahead_of(self, node: Node, children: list[str]) -> list[str] | None:
        """The nodes ahead of ``node`` in ``children``, but those known to be foreign."""
        return line.ahead_of(
            node.path.rpartition("/")[2], children, self.session.foreign.in_line(self.layout.lease(node.name))
        )

    def _vetted(self, node: Node, ahead: list[str], deadline: Deadline) -> list[str]:
        """The nodes ahead that a refusal may rest on: one of them must be a session's.

        Nodes nobody knows yet are looked at from the head, a few together, until one is a
        session's; a foreign node, or one gone meanwhile, is no reason to refuse (``foreign.py``).
        A waiter needs none of this: the watches it sets on the nodes ahead look at them.
        """
        directory = self.layout.lease(node.name)
        foreign = self.session.foreign
        while ahead and not foreign.known_sessions(directory, ahead):
            looked_at = ahead[:WATCHED_AHEAD]
            looks = self.session.send(*(requests.exists(f"{directory}/{child}") for child in looked_at))
            passed = set()
            for child, look in zip(looked_at, looks):
                stat = self.session.wait(look, deadline, f"reading {directory}/{child}")
                if stat is None or foreign.judge_line_node(directory, child, stat):
                    passed.add(child)
            if len(passed) < len(looked_at):
                break  # a session's node is ahead
            ahead = [child for child in ahead if child not in passed]
        return ahead

    # -- waiting in line (the watches run on kazoo's threads: every request here is asynchronous)

    def _watch(self, node: Node, ahead: list[str]) -> None:
        """Wait for the nodes ahead to go (see ``places.Watch``)."""
        recorded = self.places.watch(node, ahead)
        if recorded is None:
            return
        watch, watched = recorded
        try:
            looks = self.session.send(
                *(
                    requests.exists(
                        self.layout.lease_node(node.name, child),
                        watch=functools.partial(self._ahead_changed, watch, child),
                    )
                    for child in watched
                )
            )
        except SessionExpired:
            return
        for child, looked in zip(watched, looks):
            looked.result.rawlink(functools.partial(self._ahead_looked_at, watch, child))

    def _ahead_looked_at(self, watch: Watch, child: str, result: Any) -> None:
        try:
            stat = result.get_nowait()
        except Exception:
            return  # the connection failed: every line is looked at again on reconnection
        directory = self.layout.lease(watch.node.name)
        if stat is None or self.session.foreign.judge_line_node(directory, child, stat):
            self._ahead_gone(watch, child)  # gone, or foreign: nothing to wait for

    def _ahead_changed(self, watch: Watch, child: str, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            return  # kazoo dropped the watch with the connection: see ZkSession._on_state
        if event.type == EventType.DELETED:
            self._ahead_gone(watch, child)
        else:
            self.places.watch_spent(watch)  # set them all again after a look
            self.look_at_line(watch.node)

    def _ahead_gone(self, watch: Watch, child: str) -> None:
        if not self.places.ahead_gone(watch, child):
            return
        if watch.whole:
            self._handed(watch.node)  # nobody is left ahead: no node can join there
        else:
            self.look_at_line(watch.node)  # who is ahead now?

    def look_at_line(self, node: Node) -> None:
        """List the line of a waiting ``node`` again, and act on where it stands."""
        if not self.places.is_waiting(node):
            return  # held, given up, or ended meanwhile
        try:
            (listing,) = self.session.send(requests.children(self.layout.lease(node.name)))
        except SessionExpired:
            return
        listing.result.rawlink(functools.partial(self._line_listed, node))

    def _line_listed(self, node: Node, result: Any) -> None:
        try:
            children = result.get_nowait()
        except NoNodeError:
            children = []
        except Exception:
            return  # the connection failed: every line is looked at again on reconnection
        ahead = self._ahead_of(node, children)
        if ahead is None:
            self.places.drop(node)  # deleted by someone: the engine's next attempt joins again
        elif not ahead:
            self._handed(node)
        else:
            self._watch(node, ahead)

    def _handed(self, node: Node) -> None:
        if self.places.hand_over(node):
            session = self.session
            session.announce(
                Notification(NotificationKind.HANDED_OVER, node.name, session.session_id, node.token)
            )

    # -- leaving --------------------------------------------------------------------------

    def stop_waiting(self, name: str, deadline: Deadline) -> None:
        """Leave the name's line; a term already handed to this session stays."""
        node = self.places.stop_waiting(name)
        if node is not None:
            self._delete(node.path, deadline)

    def release(self, name: str, deadline: Deadline, token: int | None = None) -> Released:
        """Delete the term's node if this session holds ``name`` (with ``token``, that term).

        A release of a term whose delete failed before sends it again. A session that ended
        holds nothing.
        """
        node = self.places.release(name, token)
        if node is None:
            return Released(held=self.answers.held_after_release(name, token))
        removed = self._delete(node.path, deadline, term=node)
        oldest = self.idle.emptied(name)
        if oldest is not None:
            self._delete_lines([oldest])
        return Released(held=self.answers.held_after(node.path, removed))

    def _delete(self, path: str, deadline: Deadline, *, term: Node | None = None) -> bool:
        """Delete one of the leaving nodes: True when this delete removed it, False when it was gone.

        A delete that fails is sent again later. For a ``term``'s node, what that delete answers
        once it answers late is kept, for a release of the term asked again.
        """
        deleting: Sent | None = None
        try:
            (deleting,) = self.session.send(requests.delete(path))
            self.places.delete_sent(path, deleting.seq)
            self.session.wait(deleting, deadline, f"deleting {path}")
            removed = True
        except NoNodeError:
            removed = False
        except SessionExpired:
            return False  # its ephemeral nodes are gone with it
        except BaseException:
            if term is not None and deleting is not None:
                first = not self.answers.tracks(path)
                self.answers.failed(path, term.name, term.token)
                self._hear_late(path, deleting, first=first)
            self.places.delete_failed(path)
            raise
        self.places.deleted(path)
        return removed

    def _hear_late(self, path: str, deleting: Sent, *, first: bool) -> None:
        """Keep what a delete of a term's node answers, whenever it answers (see ``answers.py``)."""
        deleting.result.rawlink(functools.partial(self._delete_answered, path, first))

    def _delete_answered(self, path: str, first: bool, result: Any) -> None:
        try:
            result.get_nowait()
        except NoNodeError:
            self.answers.answered(path, removed=False, first=first)
        except Exception:
            return  # lost with the connection: it tells nothing
        else:
            self.answers.answered(path, removed=True, first=first)

    def send_after_failed_deletes(self, name: str | None, *requests_after: Request) -> list[Sent]:
        """Send ``requests_after`` behind the deletes that failed before (of ``name``'s nodes only).

        In one round trip: a listing among them then tells whether those deletes succeeded this
        time (``Places.settle``). Returns what ``requests_after`` were sent as.
        """
        paths = self.places.to_delete_again(name)
        sent = self.session.send(*map(requests.delete, paths), *requests_after)
        for path, deleting in zip(paths, sent):
            self.places.delete_sent(path, deleting.seq)
            if self.answers.tracks(path):
                self._hear_late(path, deleting, first=False)
        return sent[len(paths) :]

    def delete_idle_lines(self) -> None:
        """Delete the lines this session emptied and left idle an interval (``idle.py``).

        Nothing waits for the replies: a line another session joined meanwhile is not empty,
        and its delete fails, changing nothing.
        """
        self._delete_lines(self.idle.due())

    def _delete_lines(self, names: list[str]) -> None:
        for name in names:
            self.places.forget_line(name)  # the next acquire makes it again
            self.session.guard.forget(self.layout.lease(name))
        with contextlib.suppress(SessionExpired):
            self.session.send(*(requests.delete(self.layout.lease(name)) for name in names))

    def _settle(self, name: str, children: list[str], listing: Sent) -> None:
        lined = {self.layout.lease_node(name, child) for child in children}
        self.places.settle(lined, listing.seq, name)

    # -- creates whose reply was lost -----------------------------------------------------

    def adopt_lost_creates(self, unknown: list[tuple[str, str]], seq: int, deadline: Deadline) -> None:
        """Nodes of ours a listing sent as request ``seq`` found (``(path, name)``): hold or delete each."""
        session = self.session
        names = sorted({name for _, name in unknown})
        looks = session.send(
            *(requests.children(self.layout.lease(name)) for name in names),
            *(requests.exists(path) for path, _ in unknown),
        )
        lines = dict(zip(names, looks))
        stats = dict(zip((path for path, _ in unknown), looks[len(names) :]))
        strays = []
        for path, name in unknown:
            try:
                children = session.wait(lines[name], deadline, f"listing the line of {name!r}")
            except NoNodeError:
                continue
            stat = session.wait(stats[path], deadline, f"reading {path}")
            foreign = session.foreign.in_line(self.layout.lease(name))
            ahead = line.ahead_of(path.rpartition("/")[2], children, foreign)
            if stat is None or ahead is None:
                continue  # deleted meanwhile
            found = self.places.found(Node(name, path, stat.czxid, seq), first=not ahead)
            if found is Found.HELD:
                logger.info("django-simba: session %s holds %r (a reply was lost)", session.session_id, name)
            elif found is Found.STRAY:
                strays.append(path)
        for path in strays:
            self._delete(path, deadline)
