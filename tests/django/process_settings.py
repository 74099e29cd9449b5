"""Settings for management commands run as child processes of a test.

The child must open the database the test runs on (pytest-django's test
database), so the test passes its name in ``SIMBA_CHILD_DB_NAME``; the child's
``SIMBA`` comes as JSON in ``SIMBA_CHILD_SIMBA``.
"""

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES

if os.environ.get("SIMBA_CHILD_DB_NAME"):
    DATABASES["default"]["NAME"] = os.environ["SIMBA_CHILD_DB_NAME"]

SIMBA = json.loads(os.environ.get("SIMBA_CHILD_SIMBA") or "{}")
