"""Objects named by dotted path, for the parts below the Django layer (which uses Django's own)."""

from __future__ import annotations

import importlib
from typing import Any


def import_dotted(path: str) -> Any:
    """The object ``path`` names (``"package.module.attribute"``); ``ImportError`` saying why not."""
    module, _, attribute = path.rpartition(".")
    if not module:
        raise ImportError(f"{path!r} is not a dotted path of a module and an attribute")
    try:
        return getattr(importlib.import_module(module), attribute)
    except AttributeError as error:
        raise ImportError(f"module {module!r} has no attribute {attribute!r}") from error
