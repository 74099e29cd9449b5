from django.http import HttpRequest, HttpResponse
from django.urls import path

from django_simba import lock


def plain(request: HttpRequest) -> HttpResponse:
    """A page that does not use django-simba."""
    return HttpResponse("plain")


def locked(request: HttpRequest) -> HttpResponse:
    with lock("tinysite:page", timeout=5) as term:
        return HttpResponse(str(term.token))


urlpatterns = [path("plain/", plain), path("locked/", locked)]
