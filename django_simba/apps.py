"""The Django application of django-simba."""

from __future__ import annotations

from django.apps import AppConfig


class SimbaConfig(AppConfig):
    name = "django_simba"
    verbose_name = "Simba coordination"
    default_auto_field = "django.db.models.BigAutoField"
