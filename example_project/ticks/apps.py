from django.apps import AppConfig


class TicksConfig(AppConfig):
    name = "ticks"
    label = "ticks"
    verbose_name = "Demo ticks"
    default_auto_field = "django.db.models.BigAutoField"
