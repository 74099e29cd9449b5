"""Real-fault tests: worker processes contend for a lock on real servers while faults are injected.

Run them with ``.venv/bin/python -m pytest tests/faults`` (``SIMBA_REQUIRE_SERVERS=1`` to fail
instead of skip when a server is missing; ``SIMBA_FAULTS_REPORT=path.json`` to keep the
measurements). The pieces: ``worker.py`` (the program each worker runs), ``register.py`` (the
fenced register in PostgreSQL), ``fleet.py`` (starting, reading and stopping workers),
``injectors.py`` (faults from outside), ``checks.py`` (the invariants), ``scenario.py`` (one fault
from start to verdict).
"""
