"""Validation of lease and group names and of session metadata (design: Rules, names).

Checked before any I/O, so a bad name never reaches a backend.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import InvalidMetadata, InvalidName

MAX_NAME_LENGTH = 128
MAX_METADATA_LENGTH = 1024
NAME_ALPHABET = "A-Z a-z 0-9 . _ : -"

_NAME_CHARACTERS = re.compile(r"[A-Za-z0-9._:-]*\Z")


#: Names found valid before (exact ``str`` only, so equal means the same characters): every backend
#: call validates its name, and a process uses a few names over and over. Bounded, as names may not be.
_VALID_NAMES: set[str] = set()
_VALID_NAMES_KEPT = 1024


def validate_name(name: object) -> str:
    """Return ``name`` when it is a valid lease or group name, else raise :class:`InvalidName`."""
    if type(name) is str and name in _VALID_NAMES:
        return name
    if not isinstance(name, str):
        raise InvalidName(name, f"must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidName(name, "must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(name, f"must be at most {MAX_NAME_LENGTH} characters, not {len(name)}")
    if not _NAME_CHARACTERS.match(name):
        bad = next(ch for ch in name if not _NAME_CHARACTERS.match(ch))
        raise InvalidName(name, f"character {bad!r} is not one of {NAME_ALPHABET}")
    if name in (".", ".."):
        raise InvalidName(name, "must not be '.' or '..'")
    if type(name) is str and len(_VALID_NAMES) < _VALID_NAMES_KEPT:
        _VALID_NAMES.add(name)
    return name


def validate_prefix(prefix: object) -> str:
    """A prefix for ``leases(prefix)``: empty, or the start of a valid name."""
    if not isinstance(prefix, str):
        raise InvalidName(prefix, f"prefix must be a str, not {type(prefix).__name__}")
    if len(prefix) > MAX_NAME_LENGTH or not _NAME_CHARACTERS.match(prefix):
        raise InvalidName(prefix, f"prefix must be at most {MAX_NAME_LENGTH} of {NAME_ALPHABET}")
    return prefix


def validate_metadata(metadata: object) -> str:
    """Metadata is a short human string: at most 1024 characters, no control characters."""
    if not isinstance(metadata, str):
        raise InvalidMetadata(f"metadata must be a str, not {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_LENGTH:
        raise InvalidMetadata(
            f"metadata must be at most {MAX_METADATA_LENGTH} characters, not {len(metadata)}"
        )
    for ch in metadata:
        # Control and unpaired surrogate characters cannot be stored by every backend.
        if unicodedata.category(ch) in ("Cc", "Cs"):
            raise InvalidMetadata(f"metadata must not contain the control character {ch!r}")
    return metadata
