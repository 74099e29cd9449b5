"""The backend's ``OPTIONS``, checked once when the backend is built.

``{"hosts": "zk1:2181,zk2:2181,zk3:2181", "root": "/simba", "connection_timeout": 5.0,
"auth": [...], "acl": "auto", "tls": {...}, "sasl": {...}}``; every key is optional. ``hosts``
may end with a chroot (``zk1:2181/apps``) as kazoo allows. Security keys: see ``security.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...spi import ConfigurationError
from .security import Security, parse_security

DEFAULT_HOSTS = "127.0.0.1:2181"
DEFAULT_ROOT = "/simba"
KNOWN_KEYS = frozenset({"hosts", "root", "connection_timeout", "auth", "acl", "tls", "sasl"})

# Absolute, no trailing slash, no empty / "." / ".." component (ZooKeeper rejects them).
_ROOT = re.compile(r"(/(?!\.\.?(/|$))[^/\x00-\x1f\x7f]+)+")


@dataclass(frozen=True)
class ZookeeperOptions:
    hosts: str
    root: str
    connection_timeout: float
    security: Security


def parse_options(options: Mapping[str, Any], *, timeout: float) -> ZookeeperOptions:
    unknown = set(options) - KNOWN_KEYS
    if unknown:
        raise ConfigurationError(f"unknown ZooKeeper options {sorted(unknown)}; known: {sorted(KNOWN_KEYS)}")
    hosts = options.get("hosts", DEFAULT_HOSTS)
    if not isinstance(hosts, str) or not hosts.strip():
        raise ConfigurationError('ZooKeeper option "hosts" must be a "host:port,host:port" string')
    root = options.get("root", DEFAULT_ROOT)
    if not isinstance(root, str) or not _ROOT.fullmatch(root):
        raise ConfigurationError(
            f'ZooKeeper option "root" must be an absolute node path like "/simba", not {root!r}'
        )
    connection_timeout = options.get("connection_timeout", timeout)
    if isinstance(connection_timeout, bool) or not isinstance(connection_timeout, int | float):
        raise ConfigurationError('ZooKeeper option "connection_timeout" must be a number of seconds')
    if not connection_timeout > 0:
        raise ConfigurationError('ZooKeeper option "connection_timeout" must be > 0 seconds')
    return ZookeeperOptions(hosts.strip(), root, float(connection_timeout), parse_security(options))
