"""Backends a fixture builds for its test, every one closed when the fixture ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django_simba.spi import LeaseBackend

B = TypeVar("B", bound=LeaseBackend)


def closing_all(build: Callable[..., B]) -> Iterator[Callable[..., B]]:
    """For a fixture to ``yield from``: ``build`` as it is, but each backend it made is closed after."""
    built: list[B] = []

    def make(*args: Any, **kwargs: Any) -> B:
        backend = build(*args, **kwargs)
        built.append(backend)
        return backend

    yield make
    for backend in built:
        backend.close()
