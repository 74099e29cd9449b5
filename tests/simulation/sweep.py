"""How large the suite's sweep of seeds is (read by its conftest and its tests)."""

from __future__ import annotations

import os

SEEDS = int(os.environ.get("SIMBA_SIM_SEEDS", "2000"))
#: One worker in the background (the suite's other tests need the other core); more when asked.
JOBS = int(os.environ.get("SIMBA_SIM_JOBS", "1"))
