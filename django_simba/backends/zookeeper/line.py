"""A lease name's line: the sequential nodes under ``{root}/leases/{name}``, and who holds the name.

Every session that asks for a name creates an ephemeral sequential node there, named
``{session id}-{sequence}``. The node with the lowest sequence holds the name, and the others
wait in sequence order. The holder's token is its node's czxid: nodes are created in sequence
order, so each holder's czxid is higher than the one before it.

A node with that name is not necessarily a session's: anyone the line's ACL lets create may
plant one (``foreign.py`` tells them apart by their owner, and they are left out of the line).
"""

from __future__ import annotations

from collections.abc import Container

SEQUENCE_DIGITS = 10  # ZooKeeper appends the parent's counter as 10 digits


def node_prefix(session_id: str) -> str:
    """What a session's nodes are created as; the server appends the sequence."""
    return f"{session_id}-"


def sequence_of(node: str) -> int | None:
    """A node's place in its line, or ``None`` for a node that is not one of ours."""
    session_id, dash, digits = node.rpartition("-")
    if not (session_id and dash and len(digits) == SEQUENCE_DIGITS and digits.isdigit()):
        return None
    return int(digits)


def session_of(node: str) -> str:
    return node.rpartition("-")[0]


def in_order(children: list[str], foreign: Container[str] = ()) -> list[str]:
    """The line: our nodes among ``children``, first (the holder) to last.

    ``foreign``: children known to be no session's node (``foreign.py``), left out.
    """
    placed = [
        (sequence, child)
        for child in children
        if (sequence := sequence_of(child)) is not None and child not in foreign
    ]
    return [child for _, child in sorted(placed)]


def head(children: list[str], foreign: Container[str] = ()) -> str | None:
    """The node holding the name, or ``None`` when nobody does."""
    line = in_order(children, foreign)
    return line[0] if line else None


def ahead_of(node: str, children: list[str], foreign: Container[str] = ()) -> list[str] | None:
    """The nodes before ``node`` in line, nearest last; ``None`` when ``node`` is not in it."""
    if node not in children:
        return None
    line = in_order(children, foreign)
    return line[: line.index(node)] if node in line else None
