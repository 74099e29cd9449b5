"""A session's group memberships: one ephemeral node per group, ``{root}/groups/{group}/{session}``.

The group node is a container (the server deletes it once its last member is gone, in its own
time; a session deletes the group nodes it emptied itself, ``idle.py``), so a join may find it
missing, or removed between its creation and the member's: it creates it and tries again. A
member node lives exactly as long as the ZooKeeper session.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError, NoNodeError

from ...spi import BackendUnavailable, SessionExpired, UnsafeAcl
from . import requests
from .errors import Deadline
from .idle import IdleNodes
from .requests import Sent

if TYPE_CHECKING:
    from .session import LayoutPreparer, ZkSession

_CREATE_ATTEMPTS = 4  # the group node can vanish between its creation and the member's


class Groups:
    """The group side of one ``ZkSession``."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.layout = session.layout
        self.idle = IdleNodes()

    def join(self, group: str, deadline: Deadline, prepare_layout: LayoutPreparer) -> None:
        session = self.session
        session.ensure_live(deadline)
        self.idle.touched(group)
        path = self.layout.member(group, session.session_id)
        acl = session.security.acl_for(path)
        data = session.metadata.encode()
        directory = self.layout.group(group)
        for _ in range(_CREATE_ATTEMPTS):
            # the first time this backend meets the group node, its ACL too (acls.py)
            look = [requests.acls(directory)] if session.guard.needs_check(directory) else []
            *looked, created = session.send(*look, requests.create(path, data, acl))
            try:
                _, stat = session.wait(created, deadline, f"creating {path}")
            except NodeExistsError:
                if self._check_acl(directory, looked, deadline) and self._is_own_member(path, deadline):
                    return
                continue
            except NoNodeError:
                # no group node yet, or the server removed the empty container in between
                self._create_group(group, deadline, prepare_layout)
                continue
            session.check_own(stat)
            self._check_acl(directory, looked, deadline, member=path)
            return
        raise BackendUnavailable(f"could not join group {group!r}: its node kept changing")

    def _check_acl(self, directory: str, looked: list[Sent], deadline: Deadline, member: str = "") -> bool:
        """Leave (``member``) and raise ``UnsafeAcl`` when the group node's ACL is broader than
        configured; False when the node was gone."""
        if not looked:
            return True
        session = self.session
        try:
            stored, _ = session.wait(looked[0], deadline, f"reading the ACL of {directory}")
            session.guard.check(directory, stored)
        except NoNodeError:
            return False
        except UnsafeAcl:
            if member:
                (deleted,) = session.send(requests.delete(member))
                with contextlib.suppress(NoNodeError):
                    session.wait(deleted, deadline, f"deleting {member}")
            raise
        session.guard.sound(directory)
        return True

    def _is_own_member(self, path: str, deadline: Deadline) -> bool:
        session = self.session
        (read,) = session.send(requests.exists(path))
        stat = session.wait(read, deadline, f"reading {path}")
        if stat is None or stat.ephemeralOwner == session.zk_id:
            return stat is not None
        # a node at our own member path that is not ours (left by hand): replace it
        (deleted,) = session.send(requests.delete(path))
        with contextlib.suppress(NoNodeError):
            session.wait(deleted, deadline, f"deleting {path}")
        return False

    def _create_group(self, group: str, deadline: Deadline, prepare_layout: LayoutPreparer) -> None:
        path = self.layout.group(group)
        acl = self.session.security.acl_for(path)
        for _ in range(2):
            (created,) = self.session.send(requests.create_container(path, acl))
            try:
                self.session.wait(created, deadline, f"creating group node {path}")
                return
            except NodeExistsError:
                return
            except NoNodeError:
                prepare_layout(self.session.client, deadline)

    def leave(self, group: str, deadline: Deadline) -> None:
        session = self.session
        if session.ended:
            return
        path = self.layout.member(group, session.session_id)
        try:
            (deleted,) = session.send(requests.delete(path))
            session.wait(deleted, deadline, f"deleting {path}")
        except (NoNodeError, SessionExpired):
            return
        oldest = self.idle.emptied(group)
        if oldest is not None:
            self._delete_groups([oldest])

    def delete_idle_groups(self) -> None:
        """Delete the group nodes this session emptied and left idle an interval (``idle.py``).

        Nothing waits for the replies: a group another session joined meanwhile is not empty,
        and its delete fails, changing nothing.
        """
        self._delete_groups(self.idle.due())

    def _delete_groups(self, groups: list[str]) -> None:
        paths = [self.layout.group(group) for group in groups]
        for path in paths:
            self.session.guard.forget(path)  # a node made again is checked again
        with contextlib.suppress(SessionExpired):
            self.session.send(*map(requests.delete, paths))
