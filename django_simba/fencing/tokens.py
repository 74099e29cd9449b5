"""What a fenced write carries: a lease name and a token of that name, and whether it is still valid."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ..errors import LeaseNotHeld
from ..spi.names import validate_name


class Fenceable(Protocol):
    """Anything a fenced write can be made with: a :class:`~django_simba.Term`, a :class:`Fence`."""

    @property
    def name(self) -> str: ...

    @property
    def token(self) -> int: ...

    def is_valid(self) -> bool: ...


def check_token(token: object) -> int:
    """``token`` when it is a fencing token (an int > 0), else ``ValueError``."""
    if isinstance(token, bool) or not isinstance(token, int):
        raise ValueError(f"a fencing token is an int, not {type(token).__name__}")
    if token <= 0:
        raise ValueError(f"a fencing token is > 0, not {token}")
    return token


@dataclass(frozen=True, slots=True)
class Fence:
    """A lease name and a token received from elsewhere (a task's arguments, ``simba_run``'s environment).

    This process does not hold the term, so it cannot know when the term ends:
    ``is_valid()`` is always True and only the database's comparison of tokens
    refuses a stale write.
    """

    name: str
    token: int

    def __post_init__(self) -> None:
        validate_name(self.name)
        check_token(self.token)

    def is_valid(self) -> bool:
        return True

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Fence:
        """The term of a command run by ``simba_run`` (``SIMBA_LEASE`` and ``SIMBA_TOKEN``)."""
        env = os.environ if environ is None else environ
        name, token = env.get("SIMBA_LEASE"), env.get("SIMBA_TOKEN")
        if not name or not token:
            raise LeaseNotHeld("SIMBA_LEASE and SIMBA_TOKEN are not set: not a command run by simba_run")
        try:
            number = int(token)
        except ValueError:
            raise ValueError(f"SIMBA_TOKEN must be an integer, not {token!r}") from None
        return cls(name, number)
