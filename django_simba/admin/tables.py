"""The admin's lists of the tables' rows: leases and sessions, read-only, and the force-release action.

With a backend that keeps its records in django-simba's tables (the database
backend), "Leases" and "Sessions" list those rows; every remaining time is
computed by the database, on the clock the backend uses. Other backends keep
no rows: their "Leases" and "Sessions" pages show the status page of
:mod:`.views` instead, read through the backend.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from ..models import Lease, Member, Session
from ..operations.status import format_seconds
from . import views
from .dbclock import remaining_ms, session_remaining_ms

FORCE_RELEASE_PERMISSION = views.FORCE_RELEASE_PERMISSION


class _ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    """Viewing only: the rows belong to the backend."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not views.uses_tables():
            # No rows on this backend: show what the backend itself reports.
            return views.status_view(self.admin_site, request)
        return super().changelist_view(request, extra_context)


class LeaseStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "live"), ("expired", "expired"), ("free", "free")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "live":
            return queryset.filter(remaining_ms__gt=0)
        if self.value() == "expired":
            return queryset.exclude(session_id="").filter(
                Q(remaining_ms__lte=0) | Q(remaining_ms__isnull=True)
            )
        if self.value() == "free":
            return queryset.filter(session_id="")
        return queryset


@admin.register(Lease)
class LeaseAdmin(_ReadOnly):
    list_display = ("name", "state", "holder", "token", "remaining")
    list_filter = (LeaseStateFilter,)
    search_fields = ("name",)
    search_help_text = "Lease names starting with this text (case-sensitive)."
    ordering = ("name",)
    actions = ("force_release",)
    fields = ("name", "state", "holder", "token", "remaining")
    readonly_fields = fields
    change_list_template = "admin/django_simba/lease/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        alias = views.tables_alias()
        rows = super().get_queryset(request).using(alias)
        rows = rows.annotate(remaining_ms=session_remaining_ms(OuterRef("session_id"), alias))
        if not views.may_see_metadata(request):
            return rows  # what a holder says of itself is for those who may view sessions
        sessions = Session.objects.using(alias).filter(session_id=OuterRef("session_id"))
        return rows.annotate(holder_metadata=Subquery(sessions.values("metadata")[:1]))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        prefix = search_term.strip()
        if not prefix:
            return queryset, False
        # A range, not LIKE: names compare byte by byte (binary collation), LIKE may ignore case.
        return queryset.filter(name__gte=prefix, name__lt=prefix + "~"), False

    @admin.display(description="state")
    def state(self, obj: Lease) -> str:
        return _lease_state(obj)

    @admin.display(description="holder")
    def holder(self, obj: Lease) -> str:
        if not obj.session_id:
            return "-"
        url = reverse(f"{self.admin_site.name}:django_simba_session_change", args=[obj.session_id])
        metadata = getattr(obj, "holder_metadata", None)
        if metadata is None:
            return format_html('<a href="{}">{}</a>', url, obj.session_id)
        return format_html('<a href="{}">{}</a><br><small>{}</small>', url, obj.session_id, metadata)

    @admin.display(description="remaining", ordering="remaining_ms")
    def remaining(self, obj: Lease) -> str:
        if not obj.session_id:
            return "-"
        left = getattr(obj, "remaining_ms", None)
        return format_seconds(left / 1000 if left is not None else 0)

    @admin.action(description="Force-release the selected leases", permissions=["force_release"])
    def force_release(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        names = list(queryset.values_list("name", flat=True))
        if request.POST.get("post") == "yes":
            views.release_and_report(self, request, names)
            return None
        return views.confirmation(
            self.admin_site,
            request,
            names,
            hidden=[("action", "force_release"), ("post", "yes")]
            + [(ACTION_CHECKBOX_NAME, name) for name in names],
            form_url="",
            cancel_url=request.get_full_path(),
        )

    def has_force_release_permission(self, request: HttpRequest) -> bool:
        return views.may_force_release(request)

    def get_urls(self) -> list[URLPattern]:
        site = self.admin_site
        view = site.admin_view
        custom = [
            path("status/", view(views.bind(views.status_view, site)), name="django_simba_status"),
            path("members/", view(views.bind(views.members_view, site)), name="django_simba_members"),
            path(
                "force-release/<str:name>/",
                view(views.bind(views.force_release_view, site, self)),
                name="django_simba_force_release",
            ),
        ]
        return custom + super().get_urls()


def _lease_state(obj: Lease) -> str:
    if not obj.session_id:
        return "free"
    left = getattr(obj, "remaining_ms", None)
    return "live" if left is not None and left > 0 else "expired"


class SessionStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "live"), ("expired", "expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "live":
            return queryset.filter(remaining_ms__gt=0)
        if self.value() == "expired":
            return queryset.filter(remaining_ms__lte=0)
        return queryset


@admin.register(Session)
class SessionAdmin(_ReadOnly):
    list_display = ("session_id", "metadata", "remaining", "lease_count", "group_names")
    list_filter = (SessionStateFilter,)
    search_fields = ("session_id", "metadata")
    ordering = ("session_id",)
    fields = ("session_id", "metadata", "remaining", "held_leases", "memberships")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        alias = views.tables_alias()
        held = (
            Lease.objects.using(alias)
            .filter(session_id=OuterRef("session_id"))
            .order_by()
            .values("session_id")
            .annotate(n=Count("*"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .using(alias)
            .annotate(remaining_ms=remaining_ms(), held=Subquery(held[:1]))
        )

    @admin.display(description="remaining", ordering="remaining_ms")
    def remaining(self, obj: Session) -> str:
        left = getattr(obj, "remaining_ms", None)
        return format_seconds(left / 1000 if left is not None else 0)

    @admin.display(description="leases", ordering="held")
    def lease_count(self, obj: Session) -> int:
        return getattr(obj, "held", None) or 0

    @admin.display(description="groups")
    def group_names(self, obj: Session) -> str:
        return ", ".join(self._groups(obj)) or "-"

    @admin.display(description="leases held")
    def held_leases(self, obj: Session) -> str:
        rows = Lease.objects.using(views.tables_alias()).filter(session_id=obj.session_id).order_by("name")
        items = format_html_join("", "<li>{} (token {})</li>", rows.values_list("name", "token"))
        return format_html("<ul>{}</ul>", items) if items else "-"

    @admin.display(description="groups")
    def memberships(self, obj: Session) -> str:
        return ", ".join(self._groups(obj)) or "-"

    def _groups(self, obj: Session) -> list[str]:
        rows = Member.objects.using(views.tables_alias()).filter(session_id=obj.session_id)
        return list(rows.order_by("group_name").values_list("group_name", flat=True))
