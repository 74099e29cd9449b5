from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Listed after django_simba: by now its ready() has decided whether to start the engine.
        from django_simba import registry

        from . import startup

        engine = registry.peek_engine()
        startup.ENGINE_STARTED = engine is not None and engine.started
