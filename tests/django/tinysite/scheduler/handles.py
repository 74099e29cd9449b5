"""Handles made at import time, before anything checked the settings."""

from django_simba import group, lock, semaphore

exports = semaphore("exports", permits=3, timeout=30)
nightly = lock("nightly", timeout=5)
workers = group("workers")
watched = group("watched", on_change=lambda members: None)
