"""Staff users of the admin with the permissions a test gives them (django-simba's, by codename)."""

from __future__ import annotations

from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType

from django_simba.models import Lease


def force_release_permission() -> Permission:
    """The permission, created if the Lease model's Meta does not declare it (yet)."""
    permission, _ = Permission.objects.get_or_create(
        codename="force_release_lease",
        content_type=ContentType.objects.get_for_model(Lease),
        defaults={"name": "Can force-release a lease"},
    )
    return permission


def staff(django_user_model, username: str, *codenames: str):
    user = django_user_model.objects.create_user(username, password="pw", is_staff=True)
    for codename in codenames:
        if codename == "force_release_lease":
            user.user_permissions.add(force_release_permission())
        else:
            user.user_permissions.add(
                Permission.objects.get(codename=codename, content_type__app_label="django_simba")
            )
    return user
