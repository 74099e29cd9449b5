"""The two columns of a fenced row: the highest token that wrote it, and the lease name of that token.

Their options are fixed (the fencing API relies on them), so migrations do not
repeat them, and passing another value is an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.db import models

from ..models import CaseSensitiveCharField
from ..spi.names import MAX_NAME_LENGTH

if TYPE_CHECKING:  # the stubs make fields generic; at run time they are not subscriptable
    _Field = models.Field[Any, Any]
    _BigIntegerField = models.BigIntegerField[int, int]
else:
    _Field = models.Field
    _BigIntegerField = models.BigIntegerField


class _FixedOptions(_Field):
    fixed: ClassVar[dict[str, Any]] = {}
    default_help = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for key, value in self.fixed.items():
            if kwargs.get(key, value) != value:
                raise TypeError(f"{type(self).__name__} does not take {key}={kwargs[key]!r}")
        kwargs.setdefault("help_text", self.default_help)
        super().__init__(*args, **{**self.fixed, **kwargs})

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        return name, path, args, {key: value for key, value in kwargs.items() if key not in self.fixed}


class FenceTokenField(_FixedOptions, _BigIntegerField):
    """The highest fencing token that wrote the row; 0 while no term has."""

    fixed = {"default": 0, "editable": False}
    default_help = "The highest fencing token that wrote this row (0: none yet)."


class FenceLeaseField(_FixedOptions, CaseSensitiveCharField):
    """The lease name whose tokens fence the row ("" while no term has); compared byte by byte."""

    fixed = {
        "max_length": MAX_NAME_LENGTH,
        "charset": "ascii",
        "default": "",
        "blank": True,
        "editable": False,
    }
    default_help = "The lease whose tokens fence this row."
