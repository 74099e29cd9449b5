"""The admin with Django's test client: read-only lists, status pages, and the force-release action."""

from __future__ import annotations

import logging
import re

import pytest
from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import override_settings
from django.urls import reverse

from django_simba import registry
from django_simba.engine import EndReason
from django_simba.models import Lease
from django_simba.testing import wait_until
from tests.conftest import server_missing
from tests.django.engines import reset_engine
from tests.django.staff import staff

pytestmark = pytest.mark.django_db(transaction=True)

DATABASE = {"BACKEND": "database", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "admin-tests"}
MEMORY = {**DATABASE, "BACKEND": "memory"}

LEASES = reverse("admin:django_simba_lease_changelist")
SESSIONS = reverse("admin:django_simba_session_changelist")
STATUS = reverse("admin:django_simba_status")
MEMBERS = reverse("admin:django_simba_members")


@pytest.fixture(autouse=True)
def database_backend():
    with override_settings(SIMBA=DATABASE):
        yield
        reset_engine()


@pytest.fixture
def viewer(client, django_user_model):
    client.force_login(staff(django_user_model, "viewer", "view_lease", "view_session"))
    return client


@pytest.fixture
def operator(client, django_user_model):
    client.force_login(
        staff(django_user_model, "operator", "view_lease", "view_session", "force_release_lease")
    )
    return client


@pytest.fixture
def scene():
    """A held lock, a free lease, an expired holder, and group members live and expired."""
    engine = registry.get_engine()
    backend = engine.backend
    lock = engine.lock("invoices:42", timeout=5)
    term = lock.acquire()
    engine.join("workers", 5)
    freed = backend.open_session(30, "host=batch pid=7").session_id
    backend.acquire(freed, "invoices:7")
    backend.release(freed, "invoices:7")
    # Long enough for its two calls on a loaded machine (0.3 s expired before its acquire in CI).
    crashed = backend.open_session(2.0, "host=crashed pid=9").session_id
    assert backend.acquire(crashed, "reports:nightly") is not None
    backend.join(crashed, "workers")
    wait_until(lambda: backend.owner("reports:nightly") is None, 10, message="the crashed session expired")
    yield {"engine": engine, "term": term, "lock": lock, "crashed": crashed, "batch": freed}
    if lock.locked():
        lock.release()
    backend.close_session(freed)


def rows(html: str, marker: str) -> list[str]:
    """The table rows of a changelist (or any page) that mention ``marker``."""
    return [row for row in re.findall(r"<tr[^>]*>.*?</tr>", html, re.S) if marker in row]


def test_lease_list_shows_holder_token_and_remaining(viewer, scene):
    html = viewer.get(LEASES).content.decode()
    engine, term = scene["engine"], scene["term"]
    [held] = rows(html, "invoices:42")
    assert engine.session_id in held and "admin-tests" in held
    assert f'<td class="field-token">{term.token}</td>' in held
    seconds = float(re.search(r'field-remaining">([\d.]+) s<', held).group(1))
    assert 0 < seconds <= 3
    [expired] = rows(html, "reports:nightly")
    assert "expired" in expired and scene["crashed"] in expired
    [free] = rows(html, "invoices:7")
    assert "free" in free


@pytest.mark.parametrize(
    ("state", "shown"),
    [("live", {"invoices:42"}), ("expired", {"reports:nightly"}), ("free", {"invoices:7"})],
)
def test_lease_state_filter(viewer, scene, state, shown):
    html = viewer.get(LEASES, {"state": state}).content.decode()
    listed = {name for name in ("invoices:42", "invoices:7", "reports:nightly") if rows(html, name)}
    assert listed == shown


def test_lease_search_is_a_case_sensitive_prefix(viewer, scene):
    html = viewer.get(LEASES, {"q": "invoices:"}).content.decode()
    assert rows(html, "invoices:42") and rows(html, "invoices:7") and not rows(html, "reports:nightly")
    assert not rows(viewer.get(LEASES, {"q": "INVOICES"}).content.decode(), "invoices:42")
    assert not rows(viewer.get(LEASES, {"q": "42"}).content.decode(), "invoices:42")


def test_admin_is_read_only(viewer, scene):
    change = reverse("admin:django_simba_lease_change", args=["invoices:42"])
    page = viewer.get(change)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert viewer.post(change, {"token": "99"}).status_code == 403
    assert viewer.get(reverse("admin:django_simba_lease_add")).status_code == 403
    assert viewer.get(reverse("admin:django_simba_lease_delete", args=["invoices:42"])).status_code == 403
    assert scene["engine"].owner("invoices:42").token == scene["term"].token


def test_session_list_and_detail(viewer, scene):
    engine = scene["engine"]
    html = viewer.get(SESSIONS).content.decode()
    [own] = rows(html, engine.session_id)
    assert "admin-tests" in own and "workers" in own and re.search(r"[\d.]+ s<", own)
    [crashed] = rows(html, scene["crashed"])
    assert "expired" in crashed
    assert not rows(viewer.get(SESSIONS, {"state": "live"}).content.decode(), scene["crashed"])
    detail = viewer.get(
        reverse("admin:django_simba_session_change", args=[engine.session_id])
    ).content.decode()
    assert f"invoices:42 (token {scene['term'].token})" in detail and "workers" in detail


def test_members_page_marks_expired_memberships(viewer, scene):
    html = viewer.get(MEMBERS, {"prefix": "work"}).content.decode()
    [live] = rows(html, scene["engine"].session_id)
    [expired] = rows(html, scene["crashed"])
    assert 'class="live"' in live and 'class="expired"' in expired


def test_status_page_reads_the_backend(viewer, scene):
    html = viewer.get(STATUS).content.decode()
    [lease] = rows(html, 'data-lease="invoices:42"')
    assert f'data-token="{scene["term"].token}"' in lease and scene["engine"].session_id in lease
    assert not rows(html, 'data-lease="reports:nightly"')  # expired: not held by anyone
    assert "Force release" not in html  # the viewer may not
    assert 'class="numeric expired">expired<' in rows(html, f'data-session="{scene["crashed"]}"')[0]


def test_force_release_needs_its_permission(viewer, scene):
    page = viewer.get(LEASES).content.decode()
    assert 'value="force_release"' not in page
    response = viewer.post(
        LEASES, {"action": "force_release", "_selected_action": ["invoices:42"], "post": "yes"}
    )
    assert scene["engine"].owner("invoices:42") is not None
    assert response.status_code in (200, 302)
    url = reverse("admin:django_simba_force_release", args=["invoices:42"])
    assert viewer.post(url, {"post": "yes"}).status_code == 403


def test_force_release_action_confirms_releases_and_logs(operator, scene, caplog):
    term, lock = scene["term"], scene["lock"]
    ended = []
    lock.on_lost = lambda t, reason: ended.append(reason)
    assert 'value="force_release"' in operator.get(LEASES).content.decode()
    confirm = operator.post(
        LEASES, {"action": "force_release", "_selected_action": ["invoices:42", "invoices:7"]}
    )
    html = confirm.content.decode()
    assert confirm.status_code == 200 and "Force-release leases?" in html
    assert f'<td class="numeric">{term.token}</td>' in rows(html, 'data-lease="invoices:42"')[0]
    assert "not held now" in rows(html, 'data-lease="invoices:7"')[0]
    assert scene["engine"].owner("invoices:42") is not None  # nothing happens before the confirmation
    with caplog.at_level(logging.WARNING, logger="django_simba.admin"):
        done = operator.post(
            LEASES,
            {"action": "force_release", "_selected_action": ["invoices:42", "invoices:7"], "post": "yes"},
            follow=True,
        )
    assert "Force-released 1 of 2 leases" in done.content.decode()
    assert scene["engine"].backend.owner("invoices:42") is None
    entry = LogEntry.objects.get(object_id="invoices:42")
    assert entry.action_flag == CHANGE and entry.user.username == "operator"
    assert f"token {term.token}" in entry.get_change_message()
    assert any("operator force-released 'invoices:42'" in r.getMessage() for r in caplog.records)
    # The holder learns it at its next keep-alive: its term ends as lost.
    wait_until(lambda: ended, 5, message="the holder's term ended")
    assert ended == [EndReason.TAKEN] and not term.is_valid()


def test_force_release_from_the_status_page(operator, scene):
    url = reverse("admin:django_simba_force_release", args=["invoices:42"])
    assert b'href="' + url.encode() in operator.get(STATUS).content
    confirm = operator.get(url)
    assert confirm.status_code == 200 and b"Yes, force-release" in confirm.content
    assert scene["engine"].owner("invoices:42") is not None
    done = operator.post(url, {"post": "yes"})
    assert done.status_code == 302 and done["Location"] == STATUS
    assert scene["engine"].backend.owner("invoices:42") is None
    assert LogEntry.objects.filter(object_id="invoices:42").count() == 1
    assert operator.get(reverse("admin:django_simba_force_release", args=["bad name"])).status_code == 404


def test_backends_without_rows_show_the_status_page_in_the_lists(viewer):
    with override_settings(SIMBA=MEMORY):
        reset_engine()
        engine = registry.get_engine()
        with engine.lock("jobs:import", timeout=5) as term:
            engine.join("workers", 5)
            for url in (LEASES, SESSIONS):
                html = viewer.get(url).content.decode()
                assert "Coordination status" in html and 'id="simba-backend">memory<' in html
                assert f'data-token="{term.token}"' in rows(html, 'data-lease="jobs:import"')[0]
            members = viewer.get(MEMBERS).content.decode()
            assert rows(members, engine.session_id) and "live sessions only" in members
            engine.leave("workers")
        reset_engine()


def test_the_lists_follow_the_backend_class_whatever_name_settings_give_it(viewer):
    """A database backend named by its module path keeps rows as well: the lists show them."""
    with override_settings(
        SIMBA={**DATABASE, "BACKEND": "django_simba.backends.database.vendors.AnyDatabaseBackend"}
    ):
        reset_engine()
        engine = registry.get_engine()
        with engine.lock("jobs:by-path", timeout=5) as term:
            html = viewer.get(LEASES).content.decode()
            [held] = rows(html, "jobs:by-path")
            assert f'<td class="field-token">{term.token}</td>' in held
            assert "Coordination status" not in html
            assert rows(viewer.get(SESSIONS).content.decode(), engine.session_id)
        reset_engine()


def test_pages_need_a_view_permission(client, django_user_model):
    client.force_login(staff(django_user_model, "nobody"))
    assert client.get(STATUS).status_code == 403
    assert client.get(MEMBERS).status_code == 403
    client.logout()
    assert client.get(STATUS).status_code == 302  # to the login page


def test_app_index_links_the_coordination_pages(viewer):
    html = viewer.get(reverse("admin:app_list", args=["django_simba"])).content.decode()
    assert f'href="{STATUS}"' in html and f'href="{MEMBERS}"' in html
    assert f'href="{LEASES}"' in html


@pytest.mark.redis
def test_status_page_on_a_real_redis_server(viewer):
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(settings.CACHES["redis"]["LOCATION"])
    try:
        client.ping()
    except redis.RedisError:
        server_missing("Redis")
    name = "admin-tests:redis"
    with override_settings(SIMBA={**DATABASE, "BACKEND": "redis", "OPTIONS": {"cache": "redis"}}):
        reset_engine()
        engine = registry.get_engine()
        try:
            with engine.lock(name, timeout=5) as term:
                html = viewer.get(LEASES).content.decode()
                assert 'id="simba-backend">redis<' in html
                [row] = rows(html, f'data-lease="{name}"')
                assert f'data-token="{term.token}"' in row and engine.session_id in row
        finally:
            reset_engine()
            for key in client.scan_iter(f"*{name}*"):
                client.delete(key)


def test_status_page_reports_an_unreachable_backend(viewer):
    unreachable = {"BACKEND": "redis", "OPTIONS": {"url": "redis://127.0.0.1:1/0"}, "TIMEOUT": 1}
    with override_settings(SIMBA={**DATABASE, **unreachable}):
        reset_engine()
        try:
            for url in (STATUS, LEASES):
                response = viewer.get(url)
                assert response.status_code == 200
                assert "The backend cannot be reached" in response.content.decode()
        finally:
            reset_engine()


def test_the_admin_package_registers_the_tables():
    from django.contrib import admin

    from django_simba.admin import LeaseAdmin, SessionAdmin
    from django_simba.models import Session

    assert isinstance(admin.site._registry[Lease], LeaseAdmin)
    assert isinstance(admin.site._registry[Session], SessionAdmin)
