"""The fence columns: fixed options, short migrations, and names compared byte by byte."""

from __future__ import annotations

import pytest
from django.db import connections

from django_simba.fencing import FenceLeaseField, FenceTokenField

from .conftest import each_alias
from .models import Document


def test_migrations_name_the_fields_without_their_fixed_options() -> None:
    _, path, args, kwargs = FenceTokenField().deconstruct()
    assert (path, args) == ("django_simba.fencing.fields.FenceTokenField", [])
    assert set(kwargs) == {"help_text"}
    _, path, args, kwargs = FenceLeaseField(help_text="mine").deconstruct()
    assert (path, kwargs) == ("django_simba.fencing.fields.FenceLeaseField", {"help_text": "mine"})


def test_the_fixed_options_cannot_be_changed() -> None:
    with pytest.raises(TypeError, match="default=5"):
        FenceTokenField(default=5)
    with pytest.raises(TypeError, match="max_length=10"):
        FenceLeaseField(max_length=10)
    assert FenceTokenField(default=0).default == 0


@pytest.mark.parametrize("alias", each_alias(), indirect=True)
def test_lease_names_differing_in_case_are_two_names(tables: str) -> None:
    documents = Document.objects.using(tables)
    documents.create(key="a", fence_lease="reports:daily")
    assert documents.filter(fence_lease="Reports:Daily").count() == 0
    assert documents.filter(fence_lease="reports:daily").count() == 1
    if connections[tables].vendor == "mysql":
        column = Document._meta.get_field("fence_lease")
        assert column.db_parameters(connections[tables])["collation"] == "ascii_bin"
