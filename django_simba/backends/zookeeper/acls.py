"""ACLs on nodes the backend did not create: checked against what it is configured to set.

The backend creates its nodes with the configured ACL (``security.py``); ZooKeeper leaves a node
that already exists as it is. A root created earlier by a client without credentials (a first
run with the open default, another tenant of a shared ensemble) stays open to everyone, and so
does everything the backend then relies on under it. So the ACL of every node the backend
relies on and did not just create is compared with the ACL the backend would give it: the
root, ``leases``, ``groups``, ``sessions`` and ``clock`` once per backend, before its first
session is handed out, and each line and group node the first time a session meets it. An ACL
that grants anyone a right the configured one does not is refused with :class:`UnsafeAcl`,
which names the node and its ACL (``check --deploy`` reports it as ``django_simba.E025``).

Refused, never widened or narrowed: ``setAcl`` needs the ADMIN right, which a node someone else
created seldom gives; a node that was open may already hold what an intruder planted, which a
new ACL would not remove; and a node of a shared ensemble may be another tenant's. The
operator looks, then fixes the ACLs (``setAcl -R`` in ``zkCli.sh``) or picks a new ``root``.

The configured ACL may name the creator (``auth``, as ``"creator"`` and ``"auto"`` do): the
server stores the creator's identities instead. Those identities are the digest ones the
``auth`` credentials make, and whatever the server wrote into the ACL of the session node the
first session created with a creator ACL (a SASL or certificate identity).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from kazoo.security import ACL, Permissions, make_digest_acl_credential

from ...spi import UnsafeAcl
from .security import Security, open_acl

LINES_REMEMBERED = 4096  # lines and groups whose ACL was found sound, per backend

_LETTERS = (
    (Permissions.CREATE, "c"),
    (Permissions.DELETE, "d"),
    (Permissions.READ, "r"),
    (Permissions.WRITE, "w"),
    (Permissions.ADMIN, "a"),
)
Identity = tuple[str, str]  # (scheme, id)


def describe(acl: Iterable[ACL]) -> str:
    """``scheme:id:cdrwa`` entries; a digest shows its user only (the rest is a password hash),
    and ``auth`` (the creator's identities) shows as ``creator``."""
    entries = []
    for entry in acl:
        perms = "".join(letter for bit, letter in _LETTERS if entry.perms & bit)
        if entry.id.scheme == "auth":
            entries.append(f"creator:{perms}")
            continue
        who = entry.id.id.partition(":")[0] if entry.id.scheme == "digest" else entry.id.id
        entries.append(f"{entry.id.scheme}:{who}:{perms}")
    return ", ".join(entries) or "(none)"


def excess(actual: Iterable[ACL], configured: Sequence[ACL], identities: Iterable[Identity]) -> list[ACL]:
    """The entries of ``actual`` that grant someone a right ``configured`` does not give them."""
    granted: dict[Identity, int] = {}
    for entry in configured:
        whom = identities if entry.id.scheme == "auth" else [(entry.id.scheme, entry.id.id)]
        for identity in whom:
            granted[identity] = granted.get(identity, 0) | entry.perms
    everyone = granted.get(("world", "anyone"), 0)
    return [
        entry
        for entry in actual
        if entry.perms & ~(everyone | granted.get((entry.id.scheme, entry.id.id), 0))
    ]


class AclGuard:
    """The configured ACLs, the backend's identities, and the lines and groups found sound."""

    def __init__(self, security: Security) -> None:
        self.security = security
        #: False when every node is open anyway (no ACL can be broader than ``world:anyone:cdrwa``)
        self.active = security.acl is not open_acl
        self._lock = threading.Lock()
        self._identities: set[Identity] = {
            ("digest", make_digest_acl_credential(*credential.split(":", 1)))
            for scheme, credential in security.auth
            if scheme == "digest" and ":" in credential
        }
        self._sound: OrderedDict[str, None] = OrderedDict()

    def learn(self, path: str, stored: Iterable[ACL]) -> None:
        """``stored``: the ACL the server gave ``path``, created with the configured ACL."""
        configured = self.security.acl_for(path)
        if any(entry.id.scheme == "auth" for entry in configured):
            literal = {(entry.id.scheme, entry.id.id) for entry in configured}
            with self._lock:
                self._identities |= {(e.id.scheme, e.id.id) for e in stored} - literal

    def check(self, path: str, actual: Sequence[ACL]) -> None:
        """Raise :class:`UnsafeAcl` when ``actual``, the ACL of ``path``, is broader than configured."""
        configured = self.security.acl_for(path)
        with self._lock:
            identities = set(self._identities)
        extra = excess(actual, configured, identities)
        if extra:
            raise UnsafeAcl(
                f"ZooKeeper node {path} has the ACL [{describe(actual)}], which grants "
                f"{describe(extra)} beyond the ACL the backend gives it [{describe(configured)}]: "
                "the backend does not work under a node that others may change"
            )

    def needs_check(self, path: str) -> bool:
        """A line or group node not found sound yet (checked the first time it is met)."""
        if not self.active:
            return False
        with self._lock:
            return path not in self._sound

    def forget(self, path: str) -> None:
        """``path`` is being deleted: if made again, look at its ACL again."""
        with self._lock:
            self._sound.pop(path, None)

    def sound(self, path: str) -> None:
        with self._lock:
            self._sound[path] = None
            self._sound.move_to_end(path)
            if len(self._sound) > LINES_REMEMBERED:
                self._sound.popitem(last=False)
