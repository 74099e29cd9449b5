"""Counting what a call costs: client round trips (socket sends) and server-side commands."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection


@dataclass
class Sends:
    """Every ``send_packed_command`` of redis-py: one per command, or one per pipeline per node."""

    ports: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.ports)


@contextlib.contextmanager
def counting_sends(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sends]:
    sends = Sends()
    original = AbstractConnection.send_packed_command

    def counted(self: Any, command: Any, check_health: bool = True) -> None:
        sends.ports.append(int(self.port))
        original(self, command, check_health)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counted)
        yield sends


def server_counters(clients: Iterable[redis.Redis]) -> tuple[int, int]:
    """(total_commands_processed, EVALSHA calls) summed over ``clients``' servers."""
    total = evalsha = 0
    for client in clients:
        total += int(client.info("stats")["total_commands_processed"])
        evalsha += int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    return total, evalsha
