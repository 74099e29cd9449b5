"""Fixtures of the fencing tests: the database backend's aliases and outsider, and the test tables."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connections

from tests.backends.database.conftest import alias, each_alias, outsider

from .models import MODELS


@pytest.fixture
def tables(alias: str) -> Iterator[str]:
    """The test models' tables on the test's database; yields its alias."""
    with connections[alias].schema_editor() as editor:
        for model in MODELS:
            editor.create_model(model)
    yield alias
    with connections[alias].schema_editor() as editor:
        for model in reversed(MODELS):
            editor.delete_model(model)


__all__ = ["alias", "each_alias", "outsider", "tables"]
