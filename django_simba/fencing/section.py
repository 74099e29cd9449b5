"""``with fenced(term):`` a critical section whose writes are refused once the term is over.

Inside the block, the fencing API's writes take the block's term when they are
given none, and every write statement the thread sends through Django's
connections is checked against the term's validity first. The checks in this
process only shorten the window in which a stale holder can write: the
comparison of tokens that the database makes in the fenced statements is what
closes it (docs/fencing.rst says what that covers and what it does not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connections

from ..errors import LeaseNotHeld, TermEnded
from ..spi.names import validate_name
from .tokens import Fenceable, check_token

_section_term: ContextVar[Fenceable | None] = ContextVar("django_simba_fenced_term", default=None)

# Statements that change data or schema; reads, savepoints and transaction control are let through,
# so that a refused block can still roll back.
_WRITE_VERBS = frozenset(
    {"INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "TRUNCATE", "CREATE", "ALTER", "DROP"}
)


def section_term() -> Fenceable | None:
    """The term of the innermost ``fenced()`` block around this code, or None."""
    return _section_term.get()


def term_for_write(term: Fenceable | None = None) -> Fenceable:
    """The term a fenced write is made with: ``term``, else the block's; refused if it ended."""
    chosen = term if term is not None else _section_term.get()
    if chosen is None:
        raise LeaseNotHeld("a fenced write needs a term: pass one, or write inside `with fenced(term):`")
    validate_name(chosen.name)
    check_token(chosen.token)
    if not chosen.is_valid():
        raise TermEnded(chosen.name, chosen.token)
    return chosen


def _is_write(sql: object) -> bool:
    if not isinstance(sql, str):
        return False
    words = sql.lstrip(" \t\r\n(").split(None, 1)
    return bool(words) and words[0].upper() in _WRITE_VERBS


def _write_guard(term: Fenceable) -> Callable[..., Any]:
    def refuse_writes_after_the_term(
        execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        if _is_write(sql) and not term.is_valid():
            raise TermEnded(term.name, term.token, when="this statement")
        return execute(sql, params, many, context)

    return refuse_writes_after_the_term


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextmanager
def fenced(term: Fenceable | None, *, using: str | Iterable[str] | None = None) -> Iterator[Fenceable]:
    """Run the block as a critical section of ``term``; raise :class:`TermEnded` if the term ends first.

    - Entering with no term (None) raises ``LeaseNotHeld``.
    - Entering with a term that is no longer valid raises ``TermEnded`` at once.
    - ``fenced_update`` / ``fenced_upsert`` called without a term use this one.
    - Every write statement this thread sends through the Django connections
      ``using`` (default: all of them) raises ``TermEnded`` once the term is no
      longer valid; reads are not checked.
    - A block that ends normally after its term ended raises ``TermEnded``, so
      that an enclosing ``transaction.atomic()`` rolls back.

    Works in async code too (the term follows the task), but Django runs the
    async ORM's queries on another thread, whose connections are not checked:
    in a coroutine, only the fencing API's own writes are.
    """
    if term is None:  # e.g. decorators.current_term() outside a @singleton_task call
        raise LeaseNotHeld("fenced() needs a term, not None")
    term_for_write(term)
    aliases = [using] if isinstance(using, str) else list(connections if using is None else using)
    if _in_event_loop():
        aliases = []  # the loop's thread sends no queries: the async ORM runs them on another thread
    guard = _write_guard(term)
    reset = _section_term.set(term)
    try:
        with ExitStack() as stack:
            for alias in aliases:
                stack.enter_context(connections[alias].execute_wrapper(guard))
            yield term
    finally:
        _section_term.reset(reset)
    if not term.is_valid():
        raise TermEnded(term.name, term.token, when="the end of its fenced section")
