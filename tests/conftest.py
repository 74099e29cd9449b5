"""Shared test configuration.

Under CI (``SIMBA_REQUIRE_SERVERS=1``, set by ``.ci/test``) a missing server fails
the test that needs it; in a developer's partial local run it is skipped instead.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_SERVERS = os.environ.get("SIMBA_REQUIRE_SERVERS") == "1"


def server_missing(what: str) -> None:
    """Call from a fixture when a server is unreachable: skip locally, fail under CI."""
    if REQUIRE_SERVERS:
        pytest.fail(f"{what} is not reachable, and SIMBA_REQUIRE_SERVERS=1 requires it", pytrace=False)
    pytest.skip(f"{what} is not reachable")
