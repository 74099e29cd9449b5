"""The admin in a real headless Chromium: log in, read the leases, force-release one, screenshot it."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.test import override_settings

from django_simba import registry
from tests.conftest import server_missing
from tests.django.engines import reset_engine
from tests.django.staff import staff

pytestmark = pytest.mark.django_db(transaction=True)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SIMBA = {"BACKEND": "database", "LEASE_DURATION": 3, "RENEW_INTERVAL": 1, "METADATA": "browser-tests"}


@pytest.fixture(scope="module")
def live_server():
    """pytest-django's live server, but serving the admin's static files in any case.

    tests/settings.py has neither STATIC_URL nor django.contrib.staticfiles; the
    static files handler finds the admin's CSS through the app directories anyway.
    """
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test.testcases import LiveServerThread
    from django.test.utils import modify_settings

    with override_settings(STATIC_URL="/static/"):
        thread = LiveServerThread("localhost", static_handler=StaticFilesHandler, connections_override={})
        thread.daemon = True
        thread.start()
        thread.is_ready.wait()
        if thread.error:
            raise thread.error
        # pytest-django's helper fixture turns this on for each test (ALLOWED_HOSTS).
        server = SimpleNamespace(
            url=f"http://localhost:{thread.port}",
            _live_server_modified_settings=modify_settings(ALLOWED_HOSTS={"append": "localhost"}),
        )
        yield server
        thread.terminate()


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        server_missing("chromium and chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


@pytest.fixture
def engine():
    with override_settings(SIMBA=SIMBA):
        yield registry.get_engine()
        reset_engine()


def png_facts(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values in the image data of a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    pixels = zlib.decompress(b"".join(chunks))
    return width, height, len(set(pixels))


def log_in(browser, live_server, username: str) -> None:
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element("name", "username").send_keys(username)
    browser.find_element("name", "password").send_keys("pw")
    submit(browser, browser.find_element("css selector", "input[type=submit]"))
    assert browser.find_element("id", "user-tools")


def test_operator_reads_and_force_releases_a_lease(browser, live_server, engine, django_user_model, tmp_path):
    staff(django_user_model, "operator", "view_lease", "view_session", "force_release_lease")
    lock = engine.lock("invoices:2024-12", timeout=5)
    term = lock.acquire()
    log_in(browser, live_server, "operator")

    browser.get(f"{live_server.url}/admin/django_simba/lease/?q=invoices:")
    row = browser.find_element("xpath", "//tr[.//th[contains(., 'invoices:2024-12')]]")
    assert row.find_element("css selector", "td.field-token").text == str(term.token)
    assert row.find_element("css selector", "td.field-state").text == "live"
    assert engine.session_id in row.find_element("css selector", "td.field-holder").text
    shot = tmp_path / "leases.png"
    assert browser.save_screenshot(str(shot))
    width, height, distinct = png_facts(shot.read_bytes())
    assert (width, height) == tuple(browser.execute_script("return [window.innerWidth, window.innerHeight]"))
    assert width >= 800 and height >= 600 and distinct > 50, (width, height, distinct)

    row.find_element("css selector", "input.action-select").click()
    browser.find_element("css selector", "select[name=action] option[value=force_release]").click()
    submit(browser, browser.find_element("css selector", "button[name=index]"))
    wait_for_text(browser, "#content", "Force-release leases?")
    submit(browser, browser.find_element("id", "simba-confirm"))
    wait_for_text(browser, "ul.messagelist", "Force-released 1 of 1 lease")
    assert engine.backend.owner("invoices:2024-12") is None

    browser.get(f"{live_server.url}/admin/django_simba/lease/status/")
    assert "invoices:2024-12" not in browser.find_element("id", "simba-leases").text
    assert browser.find_element("id", "simba-backend").text.startswith("database")
    status_shot = tmp_path / "status.png"
    assert browser.find_element("id", "simba-sessions").screenshot(str(status_shot))
    assert png_facts(status_shot.read_bytes())[2] > 20


def submit(browser, button, timeout: float = 10) -> None:
    """Click a button that submits a form, and wait until the page it leaves is gone.

    The click returns before the next page loads; until then, lookups reach the old
    page's elements, which go stale (or vanish from the inspector) under them."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    page = browser.find_element("tag name", "html")
    button.click()
    WebDriverWait(browser, timeout).until(expected_conditions.staleness_of(page), "the next page")


def wait_for_text(browser, selector: str, text: str, timeout: float = 10) -> None:
    """Wait for ``text`` in the element at ``selector`` while the page finishes loading."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, timeout, ignored_exceptions=(WebDriverException,)).until(
        lambda driver: text in driver.find_element("css selector", selector).text,
        f"{text!r} in {selector}",
    )
