"""The lease name of each call of a ``@singleton_task``, made from the call's arguments.

``@singleton_task("invoice:{invoice_id}", mode="lock")`` gives every invoice a lock of its
own: the template is filled with the call's arguments by parameter name, whether they were
passed by position or by keyword, defaults applied. A name a template cannot express comes
from a function instead, ``name=lambda invoice, **_: f"invoice:{invoice.pk}"``, called with
one keyword argument per parameter of the task (``*args`` as a tuple and ``**kwargs`` as a
dict, under their own names).

What can be checked before the first call is checked when the task is decorated, so that a
mistake fails at import: a field that is not a parameter of the function (or is its
``*args``/``**kwargs``), a positional, attribute or index field, a conversion, a format spec
other than an integer's (``{n:d}``, ``{n:08x}``...), literal text with a character no name
may have, literal text with no room left in 128 characters, a name function that does not
accept the parameters by name.

A filled name is checked by the name rules like any other (1 to 128 characters of
``[A-Za-z0-9._:-]``, not ``.`` or ``..``); one that breaks them raises
:class:`~django_simba.errors.InvalidName` naming the value that made it, and the call does
not run. Names are never cut nor escaped: either would let two calls that must exclude each
other share a name, or two that need not share one, without anyone noticing. Where the values
may hold other characters, make the name with a function (a digest of the value, say).
"""

from __future__ import annotations

import inspect
import re
import reprlib
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidName
from .spi import MAX_NAME_LENGTH, validate_name

#: A lease name given as a string (fixed, or a template when it has a field), or a function.
NameSpec = str | Callable[..., str]

#: Integer format specs only: zero-padding and a base. They turn an int into name characters
#: alone; any other spec (fill, alignment, sign, grouping) can add characters a name may not have.
_ALLOWED_SPEC = re.compile(r"(0[1-9][0-9]{0,2})?[dxXob]?\Z")
_NAME_CHARACTERS = re.compile(r"[A-Za-z0-9._:-]*\Z")
_SHORT = reprlib.Repr()  # keyword arguments need Python 3.12
_SHORT.maxstring = _SHORT.maxother = 60


def is_template(name: str) -> bool:
    """A fixed name has no braces (they are not name characters): any brace makes a template."""
    return "{" in name or "}" in name


def name_per_call(name: NameSpec | None, room: int = MAX_NAME_LENGTH) -> Template | Callable[..., str] | None:
    """How each call's name is made: a parsed template, a name function, or None for one fixed name.

    A fixed name is checked here, a template as far as it can be without the function.
    """
    if callable(name):
        return name
    if isinstance(name, str) and is_template(name):
        return Template.parse(name, room)
    if name is not None:
        validate_name(name)
    return None


@dataclass(frozen=True, slots=True)
class _Field:
    parameter: str
    spec: str


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text and fields, in order. Knows nothing of the function yet."""

    text: str
    pieces: tuple[str | _Field, ...]

    @classmethod
    def parse(cls, text: str, room: int = MAX_NAME_LENGTH) -> Template:
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as error:  # an unmatched brace
            raise InvalidName(text, f"is not a name template: {error}") from error
        pieces: list[str | _Field] = []
        for literal, field, spec, conversion in parsed:
            if literal:
                if not _NAME_CHARACTERS.match(literal):
                    bad = next(ch for ch in literal if not _NAME_CHARACTERS.match(ch))
                    raise InvalidName(text, f"its text has the character {bad!r}, which no name may have")
                pieces.append(literal)
            if field is None:
                continue
            where = f"field {{{field}}}"
            if not field.isidentifier():
                raise InvalidName(
                    text, f"{where} must be a parameter's name (no positions, attributes or indexes)"
                )
            if conversion:
                raise InvalidName(text, f"{where} has the conversion !{conversion}: names take str() only")
            if not _ALLOWED_SPEC.match(spec or ""):
                raise InvalidName(
                    text,
                    f"{where} has the format spec {spec!r}: only an integer's are allowed "
                    "(d, x, X, o, b, with a zero-padded width such as 08d)",
                )
            pieces.append(_Field(field, spec or ""))
        literal_length = sum(len(piece) for piece in pieces if isinstance(piece, str))
        if literal_length > room:
            raise InvalidName(text, f"its text alone is {literal_length} characters, more than {room}")
        if not any(isinstance(piece, _Field) for piece in pieces):
            validate_name(text)
        return cls(text, tuple(pieces))

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(piece.parameter for piece in self.pieces if isinstance(piece, _Field))


class CallNames:
    """Makes the lease name of one call of ``fn``, and checks it by the name rules."""

    def __init__(
        self,
        fn: Callable[..., Any],
        spec: Template | Callable[..., str],
        check: Callable[[str], object],
    ) -> None:
        self.signature = _signature(fn)
        self.spec = spec
        self.check = check
        self.function = getattr(fn, "__qualname__", repr(fn))
        if isinstance(spec, Template):
            self._check_fields(spec)
        else:
            self._check_key(spec)

    @property
    def shown(self) -> str | None:
        """What ``simba_name`` shows: the template, or None for a name function."""
        return self.spec.text if isinstance(self.spec, Template) else None

    def __call__(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        """The call's name; a call that does not fit the signature raises its TypeError, as it would."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        if isinstance(self.spec, Template):
            return self._fill(self.spec, arguments)
        name = self.spec(**arguments)
        self._checked(name, f"returned by the name function {_qualname(self.spec)}")
        return name

    def _fill(self, template: Template, arguments: Mapping[str, Any]) -> str:
        parts = []
        for piece in template.pieces:
            if isinstance(piece, str):
                parts.append(piece)
                continue
            value = arguments[piece.parameter]
            try:
                parts.append(format(value, piece.spec))
            except (TypeError, ValueError) as error:
                raise InvalidName(
                    template.text,
                    f"the call's {piece.parameter}={_SHORT.repr(value)} cannot be formatted"
                    f" with {piece.spec!r}: {error}",
                ) from error
        name = "".join(parts)
        used = ", ".join(
            f"{parameter}={_SHORT.repr(arguments[parameter])}"
            for parameter in dict.fromkeys(template.parameters)
        )
        self._checked(name, f"made from {template.text!r} with the call's {used}")
        return name

    def _checked(self, name: object, origin: str) -> None:
        try:
            self.check(name)  # type: ignore[arg-type]  # a name function may return anything
        except InvalidName as error:
            raise InvalidName(name, f"{error.rule} (the name was {origin})") from None

    def _check_fields(self, template: Template) -> None:
        parameters = self.signature.parameters
        for name in template.parameters:
            parameter = parameters.get(name)
            if parameter is None:
                known = ", ".join(parameters) or "none"
                raise InvalidName(
                    template.text,
                    f"field {{{name}}} is not a parameter of {self.function} (its parameters: {known})",
                )
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise InvalidName(
                    template.text,
                    f"field {{{name}}} is the {'*' if parameter.kind is parameter.VAR_POSITIONAL else '**'}"
                    f"{name} of {self.function}: name a parameter of its own, or use a name function",
                )

    def _check_key(self, key: Callable[..., str]) -> None:
        try:
            accepts = inspect.signature(key)
        except (TypeError, ValueError):
            return  # a builtin without a signature: it is judged by its first call
        try:
            accepts.bind(**dict.fromkeys(self.signature.parameters))
        except TypeError as error:
            raise TypeError(
                f"the name function {_qualname(key)} of the singleton_task {self.function} is called with "
                f"the task's parameters by name ({', '.join(self.signature.parameters) or 'none'}) and "
                f"cannot take them: {error}; add **_ for the ones it does not use"
            ) from None


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as error:
        message = f"a singleton_task name made from arguments needs the function's signature: {error}"
        raise TypeError(message) from error


def _qualname(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))
