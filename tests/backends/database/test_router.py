"""The router keeps django-simba's tables in the database backend's alias, and nothing else there."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import override_settings

from django_simba.models import Lease, Session
from django_simba.routers import SimbaRouter

router = SimbaRouter()


@override_settings(SIMBA={"BACKEND": "database", "OPTIONS": {"alias": "sqlite"}})
def test_the_tables_go_to_the_backends_alias_and_only_there() -> None:
    assert router.db_for_read(Lease) == "sqlite"
    assert router.db_for_write(Session) == "sqlite"
    assert router.db_for_read(User) is None
    assert router.allow_migrate("sqlite", "django_simba") is True
    assert router.allow_migrate("default", "django_simba", "lease") is False
    assert router.allow_migrate("sqlite", "auth") is False
    assert router.allow_migrate("default", "auth") is None


@override_settings(SIMBA={"BACKEND": "database"})
def test_no_opinion_on_the_default_alias() -> None:
    assert router.db_for_read(Lease) is None
    assert router.allow_migrate("default", "django_simba") is None


@override_settings(SIMBA={"BACKEND": "memory", "OPTIONS": {}})
def test_no_opinion_for_another_backend() -> None:
    assert router.db_for_write(Lease) is None
    assert router.allow_migrate("sqlite", "auth") is None


@override_settings(SIMBA="not a dict")
def test_no_opinion_while_the_settings_are_invalid() -> None:
    assert router.db_for_read(Lease) is None
