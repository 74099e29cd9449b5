"""Redis backend (single node and Redis Cluster): ``BACKEND = "redis"``.

Needs redis-py (and django-redis for ``OPTIONS = {"cache": alias}``):
``pip install django-simba[redis]``. See :mod:`.backend` for the key layout and what an
operator must configure.
"""

from ...errors import EvictionPolicyWarning
from .backend import RedisBackend

__all__ = ["EvictionPolicyWarning", "RedisBackend"]
