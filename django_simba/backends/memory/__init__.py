"""In-memory backend: for the engine's unit tests and the simulation only."""

from .backend import MemoryBackend

__all__ = ["MemoryBackend"]
