"""Helpers of the shop's own tests."""

from django.conf import settings


def on_memory() -> bool:
    """The test run uses the memory backend (the one-line test setting)."""
    return settings.SIMBA.get("BACKEND") == "memory"
