"""The Django application: it wires the library into the process and returns.

Which processes serve, and whether the engine starts when Django is ready, is
decided in :mod:`django_simba.servers` (``serving``, ``autostart``).
"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed


class SimbaConfig(AppConfig):
    name = "django_simba"
    verbose_name = "Simba coordination"
    default_auto_field = "django.db.models.BigAutoField"

    def __init__(self, app_name: str, app_module: Any) -> None:
        super().__init__(app_name, app_module)
        from .servers import wiring

        wiring.compose()  # before any app's ready() can build the engine

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .servers import autostart, wiring

        setting_changed.connect(_on_setting_changed, dispatch_uid="django_simba.setting_changed")
        wiring.wire_servers()
        autostart.maybe_autostart()


def _on_setting_changed(setting: str, **kwargs: Any) -> None:
    if setting in ("SIMBA", "DEBUG"):  # what the serving rules read
        from .servers import serving

        serving.decide_again()
    if setting == "SIMBA":
        from . import conf, registry

        conf.clear_cache()
        registry.reset()
