"""The health check page (django-health-check) with django-simba's check, for the tests that view it."""

from django.urls import path
from health_check.views import HealthCheckView

urlpatterns = [
    path("health/", HealthCheckView.as_view(checks=["django_simba.integrations.health_check.SimbaSession"])),
]
