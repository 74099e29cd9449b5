"""A session's group memberships: one ephemeral node per group, ``{root}/groups/{group}/{session}``.

The group node is a container (the server deletes it once its last member is gone), so a join
may find it missing, or removed between its creation and the member's: it creates it and tries
again. A member node lives exactly as long as the ZooKeeper session.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError, NoNodeError

from ...spi import BackendUnavailable, SessionExpired
from . import requests
from .errors import Deadline

if TYPE_CHECKING:
    from .session import LayoutPreparer, ZkSession

_CREATE_ATTEMPTS = 4  # the group node can vanish between its creation and the member's


class Groups:
    """The group side of one ``ZkSession``."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.layout = session.layout

    def join(self, group: str, deadline: Deadline, prepare_layout: LayoutPreparer) -> None:
        session = self.session
        session.ensure_live(deadline)
        path = self.layout.member(group, session.session_id)
        acl = session.security.acl_for(path)
        data = session.metadata.encode()
        for _ in range(_CREATE_ATTEMPTS):
            (created,) = session.send(requests.create(path, data, acl))
            try:
                _, stat = session.wait(created, deadline, f"creating {path}")
            except NodeExistsError:
                if self._is_own_member(path, deadline):
                    return
                continue
            except NoNodeError:
                # no group node yet, or the server removed the empty container in between
                self._create_group(group, deadline, prepare_layout)
                continue
            session.check_own(stat)
            return
        raise BackendUnavailable(f"could not join group {group!r}: its node kept changing")

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
