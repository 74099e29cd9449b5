"""In-memory backend: for the engine's unit tests and the simulation only."""

from .backend import LineMemoryBackend, MemoryBackend

__all__ = ["LineMemoryBackend", "MemoryBackend"]
