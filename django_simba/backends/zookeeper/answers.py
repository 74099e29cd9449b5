"""What a session learnt of the terms whose release failed, for the same release asked again.

A release deletes the term's own node, and a delete that finds no node means the term was gone
already (an operator force-released it). Not so after a failed delete: asked again, the release
may find no node because the first delete did remove it, its reply lost. What our own deletes of
that node answer, on time or late, tells the cases apart:

* one of them removed the node: the term was still the session's until then (held);
* the first of them found no node: someone else deleted it before (not held);
* otherwise (the first one's reply went with the connection, a later one found no node): our
  delete or an operator's, and ZooKeeper keeps no trace of which (unknown).

Only failed releases leave an entry, and only the most recent ``ANSWERS_KEPT`` are kept.
Thread-safe: late replies come on kazoo's threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

ANSWERS_KEPT = 1024


@dataclass(slots=True)
class _Answer:
    name: str
    token: int
    held: bool | None = None  # None: no delete of ours answered yet in a way that tells


class ReleaseAnswers:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_path: OrderedDict[str, _Answer] = OrderedDict()

    def tracks(self, path: str) -> bool:
        with self._lock:
            return path in self._by_path

    def failed(self, path: str, name: str, token: int) -> None:
        """The release of the term whose node is ``path`` failed: wait for what its deletes answer."""
        with self._lock:
            if path not in self._by_path:
                self._by_path[path] = _Answer(name, token)
            self._by_path.move_to_end(path)
            while len(self._by_path) > ANSWERS_KEPT:
                self._by_path.popitem(last=False)

    def answered(self, path: str, removed: bool, *, first: bool) -> None:
        """A delete of ours of ``path`` answered: it removed the node, or found none.

        Finding none says something only for the first delete: a later one may come after an
        earlier one that removed the node.
        """
        with self._lock:
            answer = self._by_path.get(path)
            if answer is not None and (removed or first):
                answer.held = removed

    def held_after(self, path: str, removed: bool) -> bool | None:
        """Whether the term was still held, given that a delete of its node just removed it or found none."""
        with self._lock:
            answer = self._by_path.pop(path, None)
        if removed:
            return True
        return False if answer is None else answer.held

    def held_after_release(self, name: str, token: int | None) -> bool | None:
        """For a release that found nothing to delete: what a failed release of that term learnt.

        Without one, nothing of that term is here any more: it was freed before, or a keep-alive
        saw its node gone (not held).
        """
        with self._lock:
            for path, answer in self._by_path.items():
                if answer.name == name and token in (None, answer.token):
                    del self._by_path[path]
                    return answer.held
        return False
