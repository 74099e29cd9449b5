"""No credential in a message (issue 28.3): not in an exception, a check, a command's output, a log
line or a page; and a session's metadata (what a process says of itself) only to those who may view
sessions, with what identifies a process recorded by default, never its arguments."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.test import modify_settings, override_settings
from django.urls import reverse

from django_simba import registry
from django_simba.conf import default_metadata
from django_simba.spi import ConfigurationError, redact
from tests.django.engines import reset_engine
from tests.django.processes import ROOT, child_environ
from tests.django.staff import staff

SECRET = "s3cret-Passw0rd"
#: A URL redis-py refuses (its port is no number), with a password in it.
BAD_URL = f"redis://:{SECRET}@127.0.0.1:notaport/0"
FAST = {"LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "TIMEOUT": 1}
REDIS = {"BACKEND": "redis", "OPTIONS": {"url": BAD_URL}, **FAST}
#: A password redis-py cuts at its "/" and quotes in part as a port (unencoded "/", "@" and no port).
AWKWARD_SECRET = "Gv3n/Hx6c@Yt2p"
AWKWARD_PIECES = ["Gv3n", "Hx6c", "Yt2p"]
REDIS_AWKWARD = {
    "BACKEND": "redis",
    "OPTIONS": {"url": f"redis://:{AWKWARD_SECRET}@127.0.0.1:6379/0"},
    **FAST,
}
#: ZooKeeper credentials in an entry the backend refuses (three parts), and in a valid one on a closed port.
ZK_BAD_ENTRY = {
    "BACKEND": "zookeeper",
    "OPTIONS": {"hosts": "127.0.0.1:1", "auth": [["digest", f"simba:{SECRET}", "x"]]},
}
ZK_CLOSED = {
    "BACKEND": "zookeeper",
    "OPTIONS": {"hosts": "127.0.0.1:1", "auth": [["digest", f"simba:{SECRET}"]]},
}


@pytest.fixture
def nothing_known(monkeypatch):
    """The helper with no secret seen before: what it masks, its rules found (not its memory)."""
    from django_simba.spi import redaction

    monkeypatch.setattr(redaction, "_known", redaction._Known())


def manage(simba: dict, *args: str) -> subprocess.CompletedProcess[str]:
    environ = child_environ("tests.django.process_settings", {**FAST, **simba})
    argv = [sys.executable, "-m", "django", *args]
    return subprocess.run(argv, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "text",
    [
        f"invalid Redis url 'redis://user:{SECRET}@host:6379/0'",
        f"rediss://{SECRET}@host/0",
        f"[('digest', 'simba:{SECRET}')]",
        f"digest simba:{SECRET}",
        f"{{'username': 'u', 'password': '{SECRET}'}}",
        f"host=db user=u password={SECRET} dbname=x",
    ],
)
def test_the_helper_masks_credentials_and_keeps_what_failed(text, nothing_known):
    shown = redact(text)
    assert SECRET not in shown and "***" in shown
    assert "host" in shown or "simba" in shown or "u" in shown


#: Passwords a driver refuses in a URL, unencoded; their pieces are what a parser would quote.
AWKWARD = {
    "slash": ("Kq7x/Wz9v", ["Kq7x", "Wz9v"]),
    "space": ("Kq7x Wz9v", ["Kq7x", "Wz9v"]),
    "at": ("Kq7x@Wz9v", ["Kq7x", "Wz9v"]),
    "all": ("Kq7x/Wz9v@Pm4t Ln8q", ["Kq7x", "Wz9v", "Pm4t", "Ln8q"]),
}


@pytest.mark.parametrize("password", list(AWKWARD))
@pytest.mark.parametrize(
    "form",
    [
        "invalid Redis url 'redis://:{}@127.0.0.1:6379/0'",
        "invalid Redis url 'redis://simba:{}@127.0.0.1:6379/0': it is refused",
        "startup_nodes ['redis://:{0}@10.0.0.1:7000', 'redis://:{0}@10.0.0.2:7000']",
    ],
)
def test_a_url_password_with_a_slash_a_space_or_an_at_is_masked_whole(password, form, nothing_known):
    secret, pieces = AWKWARD[password]
    shown = redact(form.format(secret))
    assert not [piece for piece in pieces if piece in shown], shown
    assert "127.0.0.1:6379/0" in shown or "10.0.0.2:7000" in shown  # what failed is still said


@pytest.mark.parametrize(
    "text",
    [
        f"{{'ssl_keyfile': 'k.pem', 'ssl_password': '{SECRET}'}}",
        f"SSLContext(keyfile_password={SECRET!r})",
        f"passwd={SECRET}",
        f'{{"sasl_password": "{SECRET}", "client_secret": "{SECRET}"}}',
        f"api_key={SECRET}&access_token={SECRET}",
        f"{{'password': b'{SECRET}'}}",
        f"{{'password': \"it's {SECRET}\"}}",  # a quote of the other kind inside
        f"{{'auth': [('sasl', '{SECRET}'), ('digest', 'simba:{SECRET}')]}}",
        f"auth=('simba', '{SECRET}')",
        f"'auth': [('digest', 'simba:{SECRET}'",  # a message cut short: the rest of the line goes
    ],
)
def test_every_key_that_names_a_secret_and_every_auth_tuple_is_masked(text, nothing_known):
    shown = redact(text)
    assert SECRET not in shown and "***" in shown, shown


def test_a_secret_of_the_settings_is_masked_in_the_pieces_a_driver_quotes(nothing_known):
    """redis-py refuses ``redis://:Jw5q/Tz8m@host`` with "Port could not be cast to integer value as
    'Jw5q'": a piece of the password, nothing in the message says it is one."""
    from django_simba.conf import get_settings

    url = "redis://:Jw5q/Tz8m@127.0.0.1:6379/0"
    with override_settings(SIMBA={"BACKEND": "redis", "OPTIONS": {"url": url}}):
        get_settings()  # the settings are read (the URL is not parsed yet): their secrets are known
    shown = redact("ValueError: Port could not be cast to integer value as 'Jw5q'")
    assert "Jw5q" not in shown and "integer value as" in shown


def test_what_only_looks_like_a_secret_is_masked_where_it_stands_never_remembered(nothing_known):
    """A user name alone before an @ may be a password: masked there, but a plain ``default`` user
    remembered as a secret would be masked in every message after it; so would ``None``."""
    assert redact("rediss://default@cache.internal:6380/0") == "rediss://***@cache.internal:6380/0"
    assert redact("password=None") == "password=***"
    text = "the default cache answered None"
    assert redact(text) == text


def test_nothing_but_credentials_is_masked(nothing_known):
    for text in [
        "the lease 'invoices:42' (token 17) was taken over: token=18 session_id=abc",
        "Error 111 connecting to 127.0.0.1:6379. Connection refused.",
        "Access denied for user 'root'@'localhost' (using password: YES)",
        "redis://127.0.0.1:6379/0 and zookeeper hosts 127.0.0.1:2181,10.0.0.2:2181/simba",
    ]:
        assert redact(text) == text


@pytest.mark.parametrize(
    ("simba", "what_failed"),
    [
        (REDIS, "127.0.0.1:notaport"),
        (REDIS_AWKWARD, "127.0.0.1:6379/0"),
        (ZK_BAD_ENTRY, '"auth" entry'),
        (ZK_CLOSED, "127.0.0.1:1"),
    ],
    ids=["redis-url", "redis-url-awkward-password", "zk-entry", "zk-closed"],
)
def test_check_deploy_and_simba_status_never_print_the_password(simba, what_failed):
    for args in (["check", "--deploy", "--tag", "simba"], ["simba_status"], ["simba_status", "--json"]):
        done = manage(simba, *args)
        assert done.returncode != 0, (args, done.stdout, done.stderr)
        output = done.stdout + done.stderr
        assert not [s for s in [SECRET, *AWKWARD_PIECES] if s in output], (args, output)
        assert what_failed in output, (args, output)  # what failed is still said


def test_the_exception_itself_carries_no_password():
    from django_simba import owner

    with override_settings(SIMBA=REDIS), pytest.raises(ConfigurationError) as raised:
        owner("secrets:first-use")  # the URL is read at the first call
    assert SECRET not in str(raised.value) and "127.0.0.1:notaport" in str(raised.value)


@pytest.mark.parametrize("simba", [REDIS, REDIS_AWKWARD], ids=["redis-url", "redis-url-awkward-password"])
def test_the_exceptions_traceback_carries_no_password(simba):
    """What Django logs of a view that raised it (``django.request``), chained errors included: redis-py's
    own error quoted a piece of the password (``'Gv3n'``), chained under the masked one."""
    import traceback

    from django_simba import owner

    with override_settings(SIMBA=simba):
        try:
            with pytest.raises(ConfigurationError) as raised:
                owner("secrets:first-use")
        finally:
            reset_engine()
    text = "".join(traceback.format_exception(raised.value))
    assert "Port could not be cast to integer value" in text  # what failed
    assert not [s for s in [SECRET, *AWKWARD_PIECES] if s in text], text


def test_the_default_metadata_identifies_the_process_without_its_arguments(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/srv/venv/bin/gunicorn", "--env", f"API_TOKEN={SECRET}", "site.wsgi"])
    assert default_metadata().endswith(f"pid={os.getpid()} program=gunicorn")
    monkeypatch.setattr(sys, "argv", ["manage.py", "db_worker", "--queue-name", SECRET])
    assert default_metadata().endswith("program=manage.py db_worker")


# -- the admin, with a staff user of few permissions ------------------------------------------------

STATUS = reverse("admin:django_simba_status")
MEMBERS = reverse("admin:django_simba_members")


def staff_with(client, django_user_model, username: str, *codenames: str):
    client.force_login(staff(django_user_model, username, *codenames))
    return client


@pytest.mark.django_db(transaction=True)
def test_the_status_page_shows_what_failed_never_the_password(client, django_user_model):
    member_viewer = staff_with(client, django_user_model, "members-only", "view_member")
    with override_settings(SIMBA=REDIS):
        try:
            response = member_viewer.get(STATUS)
        finally:
            reset_engine()
    html = response.content.decode()
    assert response.status_code == 200, html[:2000]
    assert "cannot be reached" in html or "invalid" in html
    assert SECRET not in html and "notaport" in html


SECRET_METADATA = f"host=web1 pid=4242 cmd=worker --token {SECRET}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("codenames", "shown"), [(("view_member",), False), (("view_member", "view_session"), True)]
)
def test_metadata_is_shown_only_to_those_who_may_view_sessions(client, django_user_model, codenames, shown):
    simba = {"BACKEND": "memory", "METADATA": SECRET_METADATA, **FAST}
    viewer = staff_with(client, django_user_model, "staff-" + "-".join(codenames), *codenames)
    with override_settings(SIMBA=simba):
        try:
            engine = registry.get_engine()
            with engine.lock("admin:metadata", timeout=5):
                engine.join("admin-workers", 5)
                pages = [viewer.get(STATUS).content.decode(), viewer.get(MEMBERS).content.decode()]
        finally:
            reset_engine()
    assert 'data-lease="admin:metadata"' in pages[0] and 'data-group="admin-workers"' in pages[1]
    for html in pages:
        assert (SECRET in html) is shown, html


# -- the health check and a serving process's log ---------------------------------------------------


@pytest.mark.django_db
def test_the_health_check_shows_what_failed_never_the_password(client, caplog):
    pytest.importorskip("health_check")
    import logging

    caplog.set_level(logging.DEBUG)
    pages_app = modify_settings(INSTALLED_APPS={"append": "health_check"})  # the HTML page's templates
    with pages_app, override_settings(SIMBA=REDIS_AWKWARD, ROOT_URLCONF="tests.django.health_urls"):
        try:
            pages = [client.get("/health/", {"format": "json"}), client.get("/health/")]
        finally:
            reset_engine()
    logged = "\n".join(logging.Formatter().format(record) for record in caplog.records)
    for response in pages:
        body = response.content.decode()
        assert response.status_code == 500, body[:2000]
        assert "no live session on the redis backend" in body  # what failed
        assert not [s for s in AWKWARD_PIECES if s in body], body
    assert "SimbaSession" in logged  # the health check logged the failure, with its traceback
    assert not [s for s in AWKWARD_PIECES if s in logged], logged


@pytest.mark.redis  # redis-py: the URL is refused before any server is asked
def test_a_serving_process_logs_what_failed_never_the_password(tmp_path):
    """gunicorn's workers of the tiny project (an election in ``ready()``) on a Redis URL that redis-py
    refuses: every worker logs why it has no session, and no piece of the password."""
    from tests.django.processes import (
        TINYSITE_SETTINGS,
        booted_workers,
        every_worker_logs,
        gunicorn_argv,
        running,
    )

    environ = child_environ(
        TINYSITE_SETTINGS,
        REDIS_AWKWARD,
        TINYSITE_ELECTION="secrets:scheduler",
        SIMBA_CHILD_SQLITE=str(tmp_path / "db.sqlite3"),
    )
    with running(gunicorn_argv(), environ) as (_, output):
        workers = booted_workers(output)
        failed = r"pid=(\d+) WARNING django_simba\S* .*cannot open a session on the redis backend"
        every_worker_logs(output, workers, failed, "why it has no session")
    text = output.text()
    assert "127.0.0.1:6379/0" in text  # what failed
    assert not [s for s in [AWKWARD_SECRET, *AWKWARD_PIECES] if s in text], text
