"""Bad input: settings, names and metadata of any shape get a clear error and change nothing."""

from __future__ import annotations

import logging
import unicodedata

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_simba import conf
from django_simba.backends.memory import MemoryBackend
from django_simba.checks import check_settings
from django_simba.engine import Engine, EngineConfig, ThreadRuntime
from django_simba.spi import (
    BackendUnavailable,
    ConfigurationError,
    InvalidMetadata,
    InvalidName,
    validate_metadata,
    validate_name,
)
from django_simba.testing import wait_until

anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
keys = st.sampled_from([*conf.DEFAULTS, "BACKNED", "lease_duration", ""])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(simba=st.one_of(anything, st.dictionaries(keys, anything, max_size=6)))
def test_any_settings_value_gives_checks_or_settings_never_a_crash(simba):
    with override_settings(SIMBA=simba):
        messages = check_settings()
        assert all(m.id.startswith("django_simba.") and m.hint for m in messages)
        errors = [m for m in messages if m.level >= 40]
        if errors:
            with pytest.raises(ConfigurationError):
                conf.get_settings()


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=1100))
def test_metadata_is_accepted_or_rejected_clearly(text):
    invalid = len(text) > 1024 or any(unicodedata.category(ch) in ("Cc", "Cs") for ch in text)
    if invalid:
        with pytest.raises(InvalidMetadata):
            validate_metadata(text)
    else:
        assert validate_metadata(text) == text


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.text(max_size=140), anything))
def test_names_are_accepted_or_rejected_with_the_rule(name):
    try:
        assert validate_name(name) == name
    except InvalidName as error:
        assert error.rule and isinstance(error, ValueError)


class FlakyBackend(MemoryBackend):
    """The in-memory backend, unreachable while ``down`` is set."""

    down = True
    refused = 0

    def open_session(self, lease_duration, metadata=""):
        if self.down:
            self.refused += 1
            raise BackendUnavailable("connection refused (simulated)")
        return super().open_session(lease_duration, metadata)


def test_backend_down_at_start_up_retries_with_backoff_and_logs_once(caplog):
    backend = FlakyBackend(timeout=0.5)
    engine = Engine(backend, EngineConfig(lease_duration=2, renew_interval=0.5), ThreadRuntime())
    caplog.set_level(logging.WARNING, logger="django_simba.engine")
    try:
        engine.start()
        with pytest.raises(BackendUnavailable, match="connection refused"):
            engine.lock("job").acquire(timeout=0)
        wait_until(lambda: backend.refused >= 3, 10, message="opens retried")
        # Logged once, not per retry: the retries are counted until the backend answers.
        assert [r.getMessage() for r in caplog.records] == [caplog.records[0].getMessage()]
        assert "cannot open a session" in caplog.records[0].getMessage()
        backend.down = False
        with engine.lock("job", timeout=5) as term:
            assert term.token == 1
        assert "answers again" in caplog.records[-1].getMessage()
    finally:
        engine.close()
