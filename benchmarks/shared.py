"""Shared-memory slots of 64-bit integers that the parent and its workers read and write.

Used for the contention check (the "holder" slot a process fills while it
believes it holds the lock), start barriers, and monotonic timestamps
(``time.monotonic_ns`` is CLOCK_MONOTONIC, one clock for every process of the host).
A file under ``/dev/shm`` mapped by every process: no resource tracker involved,
so workers may attach and detach freely, and the creator removes it.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import time
import uuid
from pathlib import Path

_DIRECTORY = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


class Slots:
    """``count`` int64 slots in a file mapped into memory."""

    def __init__(self, path: Path, owner: bool) -> None:
        self.path = path
        self.owner = owner
        with path.open("r+b") as file:
            self._map = mmap.mmap(file.fileno(), 0)
        self.values = memoryview(self._map).cast("q")

    @classmethod
    def create(cls, count: int) -> Slots:
        path = _DIRECTORY / f"simba-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        path.write_bytes(bytes(8 * count))
        return cls(path, owner=True)

    @classmethod
    def attach(cls, name: str) -> Slots:
        return cls(Path(name), owner=False)

    @property
    def name(self) -> str:
        return str(self.path)

    def __getitem__(self, index: int) -> int:
        return int(self.values[index])

    def __setitem__(self, index: int, value: int) -> None:
        self.values[index] = value

    def wait_for(self, index: int, timeout: float, *, interval: float = 0.0005) -> int:
        """Wait until slot ``index`` is non-zero; return it (TimeoutError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self[index]
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"shared slot {index} still 0 after {timeout:g} s")
            time.sleep(interval)

    def close(self) -> None:
        self.values.release()
        self._map.close()
        if self.owner:
            self.path.unlink(missing_ok=True)
