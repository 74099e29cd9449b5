"""The lines and group nodes a session emptied, to delete once they stayed idle (issue 28.4).

A name's line, ``{root}/leases/{name}``, and a group's node, ``{root}/groups/{group}``, are
container nodes: the server deletes one once empty, but only every
``znode.container.checkIntervalMs`` (a minute by default) and at most
``znode.container.maxPerMinute`` (10,000 by default) a minute, so a process that locks more
distinct names than that (``invoice:{id}``), or joins as many groups, would leave empty nodes
piling up on the server. So a session deletes the nodes it emptied itself. After its release
(or leave), a node that no acquire of the name (join of the group) by this session touched for
one whole keep-alive interval is deleted by the next keep-alive, once its own requests were
answered (it waits for none of the deletes; it sends ``PER_KEEP_ALIVE`` lines and as many group
nodes at most, the oldest first, the rest going with the next ones). At most ``REMEMBERED``
of each wait: a release (leave) beyond deletes the oldest's node at once instead.

A delete of a node another session joined meanwhile fails (not empty) and changes nothing; an
acquire (join) that meets the node deleted makes it again. Tokens are czxids, which only grow
whatever is deleted, so a new line's tokens start above the old ones. A name taken again within
an interval (a hot lock, a group joined again) keeps its node: no delete, and no create of the
line at its next acquire.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

REMEMBERED = 4096
#: Deletes a keep-alive sends at most (after its own replies): each takes the connection a moment.
PER_KEEP_ALIVE = 128


class IdleNodes:
    """The names (of lines, or of groups) whose node this session emptied, by age."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keep_alives = 0
        #: name -> how many keep-alives there had been when it was emptied; the oldest first
        self._released: OrderedDict[str, int] = OrderedDict()

    def emptied(self, name: str) -> str | None:
        """The session released its term of ``name`` (left group ``name``): its node may be empty now.

        Returns the name whose node to delete at once, the oldest, when too many wait.
        """
        with self._lock:
            self._released[name] = self._keep_alives
            self._released.move_to_end(name)
            if len(self._released) > REMEMBERED:
                return self._released.popitem(last=False)[0]
            return None

    def touched(self, name: str) -> None:
        """The session asks for ``name`` (joins it) again: its node is in use."""
        with self._lock:
            self._released.pop(name, None)

    def due(self) -> list[str]:
        """At a keep-alive: names emptied before the previous one and untouched since (the
        oldest first, ``PER_KEEP_ALIVE`` at most), whose node to delete now."""
        with self._lock:
            self._keep_alives += 1
            idle = itertools.takewhile(lambda item: item[1] <= self._keep_alives - 2, self._released.items())
            due = [name for name, _ in itertools.islice(idle, PER_KEEP_ALIVE)]
            for name in due:
                del self._released[name]
            return due

    def __len__(self) -> int:
        with self._lock:
            return len(self._released)
