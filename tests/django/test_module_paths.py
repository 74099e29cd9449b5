"""Modules that moved keep their older import paths: the same objects under both names."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("django_simba.status", "django_simba.operations.status"),
    ("django_simba.runner", "django_simba.operations.runner"),
    ("django_simba.metrics", "django_simba.integrations.prometheus"),
    ("django_simba.health", "django_simba.integrations.health_check"),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_an_older_path_gives_the_same_objects(old, new):
    pytest.importorskip("health_check")
    before, after = importlib.import_module(old), importlib.import_module(new)
    assert before.__all__, f"{old} names what it re-exports"
    for name in before.__all__:
        assert getattr(before, name) is getattr(after, name), f"{old}.{name}"


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_an_older_path_re_exports_every_public_function_and_class(old, new):
    pytest.importorskip("health_check")
    before, after = importlib.import_module(old), importlib.import_module(new)
    defined = {
        name
        for name, value in vars(after).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == after.__name__
    }
    assert defined <= set(before.__all__)


def test_the_admin_package_registers_the_tables():
    from django.contrib import admin

    from django_simba.admin import LeaseAdmin, SessionAdmin
    from django_simba.models import Lease, Session

    assert isinstance(admin.site._registry[Lease], LeaseAdmin)
    assert isinstance(admin.site._registry[Session], SessionAdmin)
