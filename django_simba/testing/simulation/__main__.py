"""``python -m django_simba.testing.simulation --help``"""

import sys

from .cli import main

sys.exit(main())
