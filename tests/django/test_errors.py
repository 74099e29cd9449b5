"""One home for errors: every exception a caller can catch is defined in ``django_simba.errors``.

The package is imported module by module and every exception class found in it is
checked: defined in ``django_simba.errors``, derived from ``SimbaError`` (warnings apart),
and importable from ``django_simba``. The few that never reach a caller are listed below,
each with the reason it may live elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings

import pytest

import django_simba
from django_simba import errors

#: Exception classes that never leave the code raising them, and why they may stay there.
INTERNAL = {
    # Private by name: each is caught a few lines from where it is raised.
    "django_simba.backends.database.backend._DeadConnection": "retried once on a new connection",
    "django_simba.backends.database.backend._Deadlock": "the rolled-back call is sent again",
    "django_simba.backends.zookeeper.leases._NodeGone": "suppressed while a line is read",
    # Public names, but caught inside their backend.
    "django_simba.backends.database.pool.PoolExhausted": "turned into BackendTimeout by the backend",
    "django_simba.backends.redis.subscriber.SubscriberDown": "the pub/sub loop reconnects on it",
    # The test kit's own failure: an AssertionError, so pytest reports it as a failed test.
    "django_simba.testing.process.OtherProcessError": "a failed assertion of the test kit",
    # The simulation's network: the simulated runtime turns it into a timeout at the caller.
    "django_simba.testing.runtime.Unanswered": "caught by the simulated runtime, never raised to a caller",
}


def package_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in the package, by its dotted path."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(django_simba.__path__, "django_simba."):
        if module_info.name.endswith("__main__"):
            continue  # a script: importing it runs it
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith("django_simba")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_a_caller_sees_is_defined_in_errors_and_exported():
    outside = sorted(path for path, cls in package_exceptions().items() if cls.__module__ != errors.__name__)
    assert outside == sorted(INTERNAL)
    for path, cls in package_exceptions().items():
        if cls.__module__ != errors.__name__:
            continue
        assert getattr(django_simba, cls.__name__) is cls, f"{path} is not exported by django_simba"
        assert cls.__name__ in django_simba.__all__


def test_every_error_derives_from_simba_error_and_warnings_from_warning():
    defined = [value for value in vars(errors).values() if isinstance(value, type)]
    exceptions = [cls for cls in defined if issubclass(cls, BaseException)]
    assert exceptions, "errors.py defines the library's exceptions"
    for cls in exceptions:
        if issubclass(cls, Warning):
            assert not issubclass(cls, errors.SimbaError), cls
        else:
            assert issubclass(cls, errors.SimbaError), cls


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("django_simba.fencing", ["StaleToken", "TermEnded", "WrongLease"]),
        ("django_simba.backends.redis", ["EvictionPolicyWarning"]),
        (
            "django_simba.spi",
            ["BackendTimeout", "BackendUnavailable", "ConfigurationError", "InvalidName", "SessionExpired"],
        ),
    ],
)
def test_the_older_import_paths_give_the_same_classes(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert getattr(imported, name) is getattr(errors, name)


def test_fencing_errors_keep_their_hierarchy():
    assert issubclass(errors.TermEnded, errors.StaleToken)
    assert issubclass(errors.WrongLease, ValueError)
    refused = errors.StaleToken("reports", 3, newer=5)
    assert (refused.lease, refused.token, refused.newer) == ("reports", 3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", errors.EvictionPolicyWarning)
        with pytest.raises(errors.EvictionPolicyWarning):
            warnings.warn("volatile-lru", errors.EvictionPolicyWarning, stacklevel=1)
