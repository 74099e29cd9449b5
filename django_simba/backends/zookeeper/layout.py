"""Where the backend keeps things under its root, and what the nodes hold.

======================================  ==========================  ==================================
path                                    kind                        data
======================================  ==========================  ==================================
``{root}/leases/{name}``                container                   (none); the server deletes it once empty
``{root}/leases/{name}/{session}-{n}``  ephemeral sequential        the session id; the lowest ``n`` holds
                                                                    the name (token = its czxid), the
                                                                    others wait in line (``line.py``)
``{root}/groups/{group}``               container                   (none); deleted once empty (idle.py)
``{root}/groups/{group}/{session}``     ephemeral                   the member's metadata
``{root}/sessions/{session}``           ephemeral                   metadata, lease and timeout (JSON);
                                                                    its mtime is the last keep-alive
``{root}/clock``                        persistent                  (none); written to read the server clock
======================================  ==========================  ==================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    root: str

    @property
    def leases(self) -> str:
        return f"{self.root}/leases"

    @property
    def groups(self) -> str:
        return f"{self.root}/groups"

    @property
    def sessions(self) -> str:
        return f"{self.root}/sessions"

    @property
    def clock(self) -> str:
        return f"{self.root}/clock"

    def lease(self, name: str) -> str:
        """The name's line: the directory of its sequential nodes."""
        return f"{self.leases}/{name}"

    def lease_node(self, name: str, node: str) -> str:
        return f"{self.leases}/{name}/{node}"

    def lease_of(self, path: str) -> tuple[str, str] | None:
        """``(name, node)`` of a path under the leases directory, or ``None``."""
        prefix = self.leases + "/"
        if not path.startswith(prefix):
            return None
        name, slash, node = path[len(prefix) :].partition("/")
        return (name, node) if name and slash and node and "/" not in node else None

    def group(self, group: str) -> str:
        return f"{self.groups}/{group}"

    def member(self, group: str, session_id: str) -> str:
        return f"{self.groups}/{group}/{session_id}"

    def session(self, session_id: str) -> str:
        return f"{self.sessions}/{session_id}"

    def persistent_nodes(self) -> list[str]:
        """Every persistent node the backend needs, parents first."""
        parts = self.root.strip("/").split("/")
        ancestors = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        return [*ancestors, *self.own_nodes()]

    def own_nodes(self) -> list[str]:
        """The root and the persistent nodes under it: what the backend relies on (``acls.py``).

        The root's ancestors are not among them: they may be shared with others, and nobody
        can delete the root or what is under it through them.
        """
        return [self.root, self.leases, self.groups, self.sessions, self.clock]


def format_session_id(zk_session_id: int) -> str:
    """ZooKeeper's 64-bit session id as 16 hex digits (kazoo reads it signed)."""
    return f"{zk_session_id & 0xFFFF_FFFF_FFFF_FFFF:016x}"


@dataclass(frozen=True)
class SessionRecord:
    """What a session node holds; ``term`` is min(lease, negotiated session timeout) in seconds."""

    metadata: str
    lease: float
    timeout: float

    @property
    def term(self) -> float:
        return min(self.lease, self.timeout)

    def encode(self) -> bytes:
        record = {"metadata": self.metadata, "lease": self.lease, "timeout": self.timeout}
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> SessionRecord:
        """Tolerates a node written by something else: its term is then 0 (shown as overdue)."""
        try:
            record = json.loads(data or b"")
            return cls(str(record["metadata"]), float(record["lease"]), float(record["timeout"]))
        except (ValueError, KeyError, TypeError):
            return cls((data or b"").decode(errors="replace"), 0.0, 0.0)
