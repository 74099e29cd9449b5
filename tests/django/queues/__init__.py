"""Task modules that real worker processes (Celery, RQ) import in the tests.

Names and queues come from the environment, so that a test run never meets the
leases or messages of another: ``SIMBA_QUEUE_PREFIX`` prefixes lease names,
``SIMBA_CELERY_URL`` is the broker and result backend, ``SIMBA_CELERY_QUEUE`` the queue.
"""

import os

import django
from django.apps import apps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.process_settings")
if not apps.ready:
    django.setup()

PREFIX = os.environ.get("SIMBA_QUEUE_PREFIX", "queues")
