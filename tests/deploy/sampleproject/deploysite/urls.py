import os

from django.http import HttpRequest, HttpResponse
from django.urls import path


def whoami(request: HttpRequest) -> HttpResponse:
    return HttpResponse(str(os.getpid()))


urlpatterns = [path("", whoami)]
