"""Start-up guards: the eviction check, and WAIT's verdict on what the engine is about to trust.

Eviction happens only under a memory limit (``maxmemory`` > 0), and drops keys by policy:

* ``allkeys-*`` may evict a held lease hash (which never expires while held): the next
  acquire of that name is granted at once while its holder still trusts its term, which
  breaks fencing silently (the token itself still goes up: it comes from the clock). Refused
  whatever the limit, since a limit can be set at any time without a restart, long after
  this check ran.
* ``volatile-*`` may evict the keys that have a TTL: session hashes (a session ends
  early), the session indexes (leases are no longer renewed; memberships drop out of
  ``members`` while their session lives, and nothing tells the member), the lines of
  waiters and idle lease hashes (harmless: their next token comes from the clock). Refused
  under a limit; without one nothing is evicted, so it is only warned.

The scripts do not rely on this check: a session found gone leaves its live leases to
expire on their own time, so even an eviction the check could not see (``check_eviction``
off, settings changed later) never lets another session take a lease its holder may still
trust. The policy and the memory limit are per instance: another database number does
not help.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from redis.exceptions import ResponseError

from ...errors import EvictionPolicyWarning
from ...spi import BackendUnavailable, ConfigurationError
from .scripting import ClusterScripting, Scripting

logger = logging.getLogger("django_simba.backends.redis")


@dataclass(frozen=True)
class Eviction:
    """A server's eviction settings: ``maxmemory-policy`` and ``maxmemory`` (bytes, 0: no limit)."""

    policy: str
    maxmemory: int


def read_evictions(scripting: Scripting) -> dict[str, Eviction]:
    """The eviction settings of the server, or of every primary of a cluster, keyed by node."""
    try:
        if isinstance(scripting, ClusterScripting):
            client = scripting.client
            replies = client.config_get("maxmemory*", target_nodes=client.PRIMARIES)
            return {str(node): _eviction(reply) for node, reply in replies.items()}
        return {"server": _eviction(scripting.client.config_get("maxmemory*"))}
    except ResponseError as error:
        raise ConfigurationError(
            f"cannot read Redis's maxmemory-policy ({error}): CONFIG is disabled or not permitted. "
            "Make sure the server runs with maxmemory-policy noeviction (or without a maxmemory), then "
            "set OPTIONS 'check_eviction': False"
        ) from error


def _eviction(reply: Mapping[str, str]) -> Eviction:
    return Eviction(str(reply.get("maxmemory-policy", "")), int(reply.get("maxmemory") or 0))


def check_evictions(evictions: Mapping[str, Eviction]) -> None:
    """Refuse ``allkeys-*``, and ``volatile-*`` under a memory limit; warn on ``volatile-*`` without one."""
    for node, eviction in sorted(evictions.items()):
        policy = eviction.policy
        if policy.startswith("allkeys-"):
            raise ConfigurationError(
                f"Redis {node} runs with maxmemory-policy {policy}: it may evict held lease keys, which "
                "gives a name to another process while its holder still trusts its term. Use noeviction "
                "(the default) or a dedicated instance"
            )
        if policy.startswith("volatile-") and eviction.maxmemory > 0:
            raise ConfigurationError(
                f"Redis {node} runs with maxmemory-policy {policy} and maxmemory {eviction.maxmemory}: "
                "under memory pressure it evicts session keys, which ends sessions early and drops group "
                "memberships of live sessions. Use noeviction (the default) or a dedicated instance"
            )
        if policy.startswith("volatile-"):
            message = (
                f"Redis {node} runs with maxmemory-policy {policy}: nothing is evicted without a maxmemory, "
                "but once one is set, session keys may be; noeviction is safer"
            )
            logger.warning("django-simba: %s", message)
            warnings.warn(message, EvictionPolicyWarning, stacklevel=2)


def require_replicas(acknowledged: int, wanted: int, what: str, outcome: str) -> None:
    """After WAIT: a reply the engine would trust counts only once ``wanted`` replicas acknowledged it.

    A failover to a replica that missed the write would otherwise undo what the engine trusts, e.g.
    expire a lease before the holder's local deadline.
    """
    if acknowledged < wanted:
        raise BackendUnavailable(
            f"only {acknowledged} of {wanted} replicas acknowledged {what} in time; {outcome}"
        )
