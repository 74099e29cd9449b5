"""Where the kits run a backend in other processes: children that share nothing with the test's.

A child forked from the test's process would inherit its connections, its threads and its
engine. A spawned child shares none of that, but imports the kit, pytest, the backend and
often Django again: about 0.5-1 s of CPU per child, a minute of a CI run. Children forked by
multiprocessing's fork server share nothing with the test's process either (the server is a
fresh interpreter that opens nothing), and find those modules already imported: the server
imports the kits and the module of the first ``backend_spec`` it serves, once.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext
from typing import Any

#: The kits whose functions run in the children.
KIT_MODULES = ("django_simba.testing.tck", "django_simba.testing.semaphore_tck")


def process_context(spec: tuple[str, dict[str, Any]]) -> ForkServerContext:
    """The multiprocessing context for children that build their backend from ``spec``."""
    factory_module = spec[0].rpartition(".")[0]
    context = multiprocessing.get_context("forkserver")
    # Read when the server starts (the first time a child is needed in this process) only.
    context.set_forkserver_preload([*KIT_MODULES, factory_module])
    return context
