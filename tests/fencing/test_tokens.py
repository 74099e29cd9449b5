"""``Fence``: a lease name and a token received from elsewhere, checked like the engine's own."""

from __future__ import annotations

import pytest

from django_simba import InvalidName
from django_simba.fencing import Fence
from django_simba.spi import LeaseNotHeld


def test_a_fence_is_always_valid_here() -> None:
    fence = Fence("reports:daily", 3)
    assert fence.is_valid() and (fence.name, fence.token) == ("reports:daily", 3)


@pytest.mark.parametrize("token", [0, -1, True, "3", 2.0])
def test_a_token_is_an_int_above_zero(token: object) -> None:
    with pytest.raises(ValueError, match="fencing token"):
        Fence("reports:daily", token)  # type: ignore[arg-type]


def test_the_name_follows_the_naming_rules() -> None:
    with pytest.raises(InvalidName):
        Fence("reports daily", 3)


def test_from_the_environment_of_simba_run() -> None:
    environ = {"SIMBA_LEASE": "jobs:nightly", "SIMBA_TOKEN": "12"}
    assert Fence.from_environ(environ) == Fence("jobs:nightly", 12)
    with pytest.raises(LeaseNotHeld, match="simba_run"):
        Fence.from_environ({"SIMBA_TOKEN": "12"})
    with pytest.raises(ValueError, match="SIMBA_TOKEN"):
        Fence.from_environ({"SIMBA_LEASE": "jobs:nightly", "SIMBA_TOKEN": "twelve"})
