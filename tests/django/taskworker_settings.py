"""Settings of the ``db_worker`` processes (django-tasks-db) the tests start, on the PostgreSQL test database.

The test passes the database's name in ``SIMBA_CHILD_DB_NAME`` and ``SIMBA`` as
JSON in ``SIMBA_CHILD_SIMBA``. On Django 5.2 the task framework is the
django-tasks backport; from Django 6 on it is Django's own.
"""

import importlib.util
import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASE_CHOICES, INSTALLED_APPS

DATABASES = {"default": {**DATABASE_CHOICES["postgresql"], "NAME": os.environ["SIMBA_CHILD_DB_NAME"]}}
INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]
if importlib.util.find_spec("django.tasks") is None:
    INSTALLED_APPS.append("django_tasks")
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
SIMBA = json.loads(os.environ.get("SIMBA_CHILD_SIMBA") or "{}")
