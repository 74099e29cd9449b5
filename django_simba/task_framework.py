"""Singleton tasks for Django's task framework: ``django.tasks`` (Django 6), or the ``django-tasks`` backport.

::

    from django_simba.task_framework import singleton_django_task

    @singleton_django_task("imports.batch", timeout=30)
    def import_batch(batch_id): ...

    result = import_batch.enqueue(42)

The function becomes a ``Task`` of the framework, and every run of it, on
whichever worker takes it from the queue, holds the lock of the name: one run
at a time in the whole cluster, each with a fencing token higher than the last
(``current_term()`` inside the run). With ``timeout`` seconds a run waits that
long for the lock; with 0 (the default) it is skipped when another run holds
it, and the skip is stored as a successful result (a ``Skipped``, a dict of JSON
values; ``Skipped.from_result(result.return_value)`` reads it back).

The name may be made from each run's arguments, ``@singleton_django_task("invoice:{invoice_id}")``
or a function of them: runs for one invoice take turns, runs for different invoices go at
once (see :mod:`django_simba.task_names`).

``permits=N`` lets up to N runs go at once, each holding a permit of a
semaphore of the name (see ``docs/semaphores.rst``).

``mode="leader"`` runs a task only on the process that leads the election of
the name. A worker that is not the leader skips every run it takes, and no
other worker takes it again, so that run happens nowhere: use it only when
every worker is sure to get the task (a queue per worker). Declaring one logs
a warning.

Other keyword arguments go to the framework's ``@task`` (``queue_name``,
``priority``, ``backend``, ``takes_context``). Coroutine functions work too.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

from . import decorators
from .spi import ConfigurationError
from .task_names import NameSpec

logger = logging.getLogger("django_simba.tasks")

#: Where the framework lives: Django's own first, then the backport.
FRAMEWORKS = ("django.tasks", "django_tasks")


def framework() -> ModuleType:
    """``django.tasks`` where Django has it (6.0 on), else the ``django-tasks`` backport."""
    for module in FRAMEWORKS:
        try:
            return importlib.import_module(module)
        except ImportError:
            continue
    raise ConfigurationError(
        "Django's task framework needs Django 6, or on Django 5.2 the django-tasks package "
        "(pip install django-tasks)"
    )


def singleton_django_task(
    name: NameSpec | None = None,
    mode: Literal["leader", "lock"] = "lock",
    *,
    timeout: float = 0,
    max_hold: float | None = None,
    wait_for_election: float | None = None,
    permits: int | None = None,
    **task_options: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """Make a Django task that runs only under the lock of ``name`` (see the module docstring)."""
    guard = decorators.singleton_task(
        name, mode, timeout=timeout, max_hold=max_hold, wait_for_election=wait_for_election, permits=permits
    )
    tasks = framework()

    def decorate(fn: Callable[..., Any]) -> Any:
        guarded = guard(fn)
        if mode == "leader":
            logger.warning(
                "django-simba: the task %s is a leader-mode singleton task: a run taken by a worker "
                "that is not the leader is skipped and runs nowhere; mode='lock' runs it on any worker",
                guarded.simba_name,  # type: ignore[attr-defined]
            )
        return tasks.task(**task_options)(guarded)

    return decorate
