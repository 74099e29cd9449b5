"""The admin's own pages: status, group members and the force-release confirmation.

They read through the configured backend (the process's engine's), so they
show the same thing on every backend; only the members page also reads the
tables of a backend that keeps its records there (``uses_tables``: the
database backend), to show memberships of expired sessions too.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ..conf import get_settings
from ..operations.status import collect, format_seconds
from ..spi import InvalidName, LeaseBackend, LeaseInfo, SimbaError, redact, validate_name, validate_prefix

logger = logging.getLogger("django_simba.admin")

if TYPE_CHECKING:  # the stubs make ModelAdmin generic; at run time it is not subscriptable
    AnyModelAdmin = admin.ModelAdmin[Any]
else:
    AnyModelAdmin = admin.ModelAdmin

FORCE_RELEASE_PERMISSION = "django_simba.force_release_lease"
#: Sessions' metadata (what a process says of itself, maybe a command line) is shown only with this.
METADATA_PERMISSION = "django_simba.view_session"
VIEW_PERMISSIONS = (
    "django_simba.view_lease",
    "django_simba.view_session",
    "django_simba.view_member",
    "django_simba.change_lease",
)


def uses_tables() -> bool:
    """True when the configured backend keeps its records in django-simba's tables (the admin lists rows)."""
    return get_settings().backend_class.uses_tables


def tables_alias() -> str:
    """The database alias of those tables."""
    settings = get_settings()
    return settings.backend_class.tables_alias(settings.options)


def admin_backend() -> LeaseBackend:
    """The process's backend (built without starting the engine: reading opens no session)."""
    from ..registry import get_engine

    return get_engine().backend


def may_view(request: HttpRequest) -> bool:
    user: Any = request.user
    return any(user.has_perm(permission) for permission in VIEW_PERMISSIONS)


def may_see_metadata(request: HttpRequest) -> bool:
    """Whether the user may see what processes say of themselves (the sessions' metadata)."""
    user: Any = request.user
    return bool(user.has_perm(METADATA_PERMISSION))


def unreachable(problem: BaseException) -> str:
    """What a page says when the backend failed: what failed, never a credential."""
    return f"The backend cannot be reached: {redact(problem)}"


def may_force_release(request: HttpRequest) -> bool:
    user: Any = request.user
    return bool(user.has_perm(FORCE_RELEASE_PERMISSION))


def bind(view: Callable[..., HttpResponse], *bound: Any) -> Callable[..., HttpResponse]:
    """A URL view with ``bound`` arguments (the admin site, a ModelAdmin) before the request."""

    @functools.wraps(view)
    def bound_view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        return view(*bound, request, **kwargs)

    return bound_view


def _context(site: admin.AdminSite, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
    from ..models import Lease

    request.current_app = site.name  # so {% url 'admin:...' %} resolves on this site
    return {
        **site.each_context(request),
        "title": title,
        "opts": Lease._meta,
        "app_label": "django_simba",
        "uses_tables": uses_tables(),
        "backend_alias": get_settings().backend_alias,
        "show_metadata": may_see_metadata(request),
        **extra,
    }


def status_view(site: admin.AdminSite, request: HttpRequest) -> HttpResponse:
    """Sessions, leases and groups as the backend reports them, with force-release links."""
    if not may_view(request):
        raise PermissionDenied
    prefix = request.GET.get("prefix", "").strip()
    snapshot, error = None, None
    try:
        snapshot = collect(admin_backend(), prefix)
    except InvalidName as problem:
        error = f"Invalid prefix: {problem}"
    except SimbaError as problem:
        error = unreachable(problem)
    leases = [
        {"info": info, "remaining": format_seconds(info.remaining)}
        for info in (snapshot.leases if snapshot else [])
    ]
    sessions = [
        {"row": row, "remaining": format_seconds(row.session.remaining)}
        for row in (snapshot.sessions if snapshot else [])
    ]
    context = _context(
        site,
        request,
        "Coordination status",
        snapshot=snapshot,
        leases=leases,
        sessions=sessions,
        error=error,
        prefix=prefix,
        may_release=may_force_release(request),
    )
    return TemplateResponse(request, "admin/django_simba/status.html", context)


def members_view(site: admin.AdminSite, request: HttpRequest) -> HttpResponse:
    """Group memberships; with the database backend, those of expired sessions too (marked)."""
    if not may_view(request):
        raise PermissionDenied
    prefix = request.GET.get("prefix", "").strip()
    rows: list[dict[str, Any]] = []
    error = None
    try:
        validate_prefix(prefix)
        rows = _member_rows(prefix)
    except InvalidName as problem:
        error = f"Invalid prefix: {problem}"
    except SimbaError as problem:
        error = unreachable(problem)
    context = _context(site, request, "Group members", rows=rows, error=error, prefix=prefix)
    return TemplateResponse(request, "admin/django_simba/members.html", context)


def _member_rows(prefix: str) -> list[dict[str, Any]]:
    if not uses_tables():
        return [
            {"group": name, "session_id": m.session_id, "metadata": m.metadata, "state": "live"}
            for name, members in admin_backend().groups(prefix).items()
            for m in members
        ]
    from ..models import Member, Session
    from .dbclock import session_remaining_ms

    alias = tables_alias()
    sessions = Session.objects.using(alias).filter(session_id=OuterRef("session_id"))
    members = Member.objects.using(alias).order_by("group_name", "session_id")
    if prefix:
        members = members.filter(group_name__gte=prefix, group_name__lt=prefix + "~")
    members = members.annotate(
        left=session_remaining_ms(OuterRef("session_id"), alias),
        metadata=Subquery(sessions.values("metadata")[:1]),
    )
    return [
        {
            "group": group,
            "session_id": session_id,
            "metadata": metadata or "",
            "state": "live" if left is not None and left > 0 else "expired",
        }
        for group, session_id, metadata, left in members.values_list(
            "group_name", "session_id", "metadata", "left"
        )
    ]


def force_release_view(
    site: admin.AdminSite,
    model_admin: AnyModelAdmin,
    request: HttpRequest,
    name: str,
) -> HttpResponse:
    """Confirm (GET), then force-release one lease (POST); for the status page on every backend."""
    if not may_force_release(request):
        raise PermissionDenied
    try:
        validate_name(name)
    except InvalidName as problem:
        raise Http404(str(problem)) from problem
    status_url = reverse(f"{site.name}:django_simba_status")
    if request.method == "POST" and request.POST.get("post") == "yes":
        release_and_report(model_admin, request, [name])
        return HttpResponseRedirect(status_url)
    return confirmation(
        site, request, [name], hidden=[("post", "yes")], form_url=request.path, cancel_url=status_url
    )


def confirmation(
    site: admin.AdminSite,
    request: HttpRequest,
    names: Sequence[str],
    *,
    hidden: Sequence[tuple[str, str]],
    form_url: str,
    cancel_url: str,
) -> HttpResponse:
    """The "are you sure?" page, listing who holds each lease now."""
    error = None
    holders: list[dict[str, Any]] = []
    try:
        backend = admin_backend()
        for name in names:
            info = backend.owner(name)
            holders.append(
                {"name": name, "info": info, "remaining": format_seconds(info.remaining) if info else "-"}
            )
    except SimbaError as problem:
        error = unreachable(problem)
    context = _context(
        site,
        request,
        "Force-release leases?",
        holders=holders,
        hidden=hidden,
        form_url=form_url,
        cancel_url=cancel_url,
        error=error,
    )
    return TemplateResponse(request, "admin/django_simba/force_release_confirmation.html", context)


def release_and_report(model_admin: AnyModelAdmin, request: HttpRequest, names: Sequence[str]) -> int:
    """Force-release ``names``, log each one, tell the user; returns how many had a live holder."""
    backend = admin_backend()
    freed = 0
    for name in names:
        try:
            holder = backend.owner(name)
            was_held = backend.force_release(name)
        except SimbaError as problem:
            failure = f"Could not force-release {name}: {redact(problem)}"
            model_admin.message_user(request, failure, messages.ERROR)
            continue
        _record(request, name, holder if was_held else None)
        freed += was_held
    model_admin.message_user(
        request,
        f"Force-released {freed} of {len(names)} lease{'s' * (len(names) != 1)} "
        f"({len(names) - freed} had no live holder).",
        messages.SUCCESS,
    )
    return freed


def _record(request: HttpRequest, name: str, holder: LeaseInfo | None) -> None:
    from ..models import Lease

    if holder is None:
        message = "Force-release: the lease had no live holder."
    else:
        # No metadata here: the admin log is shown to whoever may view leases.
        message = (
            f"Force-released from session {holder.session_id}, "
            f"token {holder.token}, {format_seconds(holder.remaining)} left."
        )
    user: Any = request.user
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[Lease(name=name, token=holder.token if holder else 0)],
        action_flag=CHANGE,
        change_message=message,
        single_object=True,
    )
    held_by = f" (holder: {holder.metadata})" if holder is not None else ""
    logger.warning(
        "django-simba: %s force-released %r: %s%s", request.user.get_username(), name, message, held_by
    )
