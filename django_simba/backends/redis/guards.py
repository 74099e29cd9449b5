"""Start-up guards: the eviction policy check, and WAIT's verdict on a new term.

Lease hashes never expire and carry the token; an ``allkeys-*`` policy may evict one
under memory pressure, and the next acquire of that name would start again at token 1.
That breaks fencing silently, so the backend refuses to run on such a server. A
``volatile-*`` policy may evict session hashes (they have a TTL), which only ends
sessions early: it is allowed with a warning. The policy and the memory limit are per
instance, so a separate database number does not help.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping

from redis.exceptions import ResponseError

from ...spi import BackendUnavailable, ConfigurationError
from .scripting import ClusterScripting, Scripting

logger = logging.getLogger("django_simba.backends.redis")


class EvictionPolicyWarning(RuntimeWarning):
    """The Redis server may evict session keys (``volatile-*``): sessions can end early."""


def read_eviction_policies(scripting: Scripting) -> dict[str, str]:
    """``maxmemory-policy`` of the server, or of every primary of a cluster, keyed by node."""
    try:
        if isinstance(scripting, ClusterScripting):
            client = scripting.client
            replies = client.config_get("maxmemory-policy", target_nodes=client.PRIMARIES)
            return {str(node): str(reply.get("maxmemory-policy", "")) for node, reply in replies.items()}
        reply = scripting.client.config_get("maxmemory-policy")
        return {"server": str(reply.get("maxmemory-policy", ""))}
    except ResponseError as error:
        raise ConfigurationError(
            f"cannot read Redis's maxmemory-policy ({error}): CONFIG is disabled or not permitted. "
            "Make sure the server runs with maxmemory-policy noeviction (or volatile-*), then set "
            "OPTIONS 'check_eviction': False"
        ) from error


def check_eviction_policies(policies: Mapping[str, str]) -> None:
    """Refuse ``allkeys-*`` (tokens could reset); warn on ``volatile-*`` (sessions could end early)."""
    for node, policy in sorted(policies.items()):
        if policy.startswith("allkeys-"):
            raise ConfigurationError(
                f"Redis {node} runs with maxmemory-policy {policy}: it may evict lease keys, which resets "
                "their fencing tokens. Use noeviction (the default) or a dedicated instance"
            )
        if policy.startswith("volatile-"):
            message = (
                f"Redis {node} runs with maxmemory-policy {policy}: under memory pressure it may evict "
                "session keys, ending sessions early; noeviction is safer"
            )
            logger.warning("django-simba: %s", message)
            warnings.warn(message, EvictionPolicyWarning, stacklevel=2)


def require_replicas(acknowledged: int, wanted: int, name: str) -> None:
    """After WAIT: a new term counts only once ``wanted`` replicas acknowledged it."""
    if acknowledged < wanted:
        raise BackendUnavailable(
            f"only {acknowledged} of {wanted} replicas acknowledged the new term of {name!r} in time; "
            "the term was given back"
        )
