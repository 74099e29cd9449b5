"""Who the backend is to ZooKeeper, and what its nodes let others do.

* ``auth``: credentials every client adds after connecting, as ``(scheme, credential)`` pairs, e.g.
  ``[("digest", "simba:secret")]``.
* ``acl``: the ACL of every node the backend creates (parents included). ``"open"`` is ZooKeeper's
  ``OPEN_ACL_UNSAFE``; ``"creator"`` gives every right to the identities of the creating client
  only (``CREATOR_ALL_ACL``: with digest auth, to that user); ``"auto"`` (the default) is
  ``"creator"`` once credentials are set and ``"open"`` otherwise, so **without credentials the
  nodes are open**. A callable (or its dotted path) ``acl(path) -> list[ACL]`` chooses per path.
* ``tls``: ``{"certfile", "keyfile", "keyfile_password", "ca", "verify_certs", "check_hostname"}``,
  passed to every kazoo client with ``use_ssl=True`` (``"use_ssl": False`` turns it off). The
  server's certificate is verified and **must name the host dialled** (as written in ``hosts``:
  a DNS name, or an IP address the certificate lists), checked before any credential is sent.
  kazoo checks no hostname unless told; here only ``"check_hostname": False``, named, turns the
  check off, and ``"verify_certs": False`` needs it spelt out too.
* ``sasl``: kazoo's ``sasl_options`` (``mechanism``, ``username``, ``password``, ``service``,
  ``principal``), which needs the ``pure-sasl`` package.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from ...spi import ConfigurationError, redact
from ...spi.dotted import import_dotted

AclProvider = Callable[[str], Sequence[ACL]]

TLS_KEYS = frozenset(
    {"use_ssl", "certfile", "keyfile", "keyfile_password", "ca", "verify_certs", "check_hostname"}
)


def open_acl(path: str) -> Sequence[ACL]:
    acl: Sequence[ACL] = OPEN_ACL_UNSAFE
    return acl


def creator_acl(path: str) -> Sequence[ACL]:
    acl: Sequence[ACL] = CREATOR_ALL_ACL
    return acl


@dataclass(frozen=True)
class Security:
    """Credentials, ACL and transport settings shared by every client of one backend."""

    auth: tuple[tuple[str, str], ...] = ()
    acl: AclProvider = open_acl
    tls: Mapping[str, Any] = field(default_factory=dict)
    sasl: Mapping[str, Any] | None = None

    @property
    def has_credentials(self) -> bool:
        return bool(self.auth) or self.sasl is not None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``KazooClient``: the same for the session and shared clients."""
        kwargs: dict[str, Any] = {"auth_data": list(self.auth)}
        if self.tls:
            kwargs.update({"use_ssl": True, **self.tls})
        if self.sasl is not None:
            kwargs["sasl_options"] = dict(self.sasl)
        return kwargs

    def acl_for(self, path: str) -> list[ACL]:
        acl = list(self.acl(path))
        if not acl or not all(isinstance(entry, ACL) for entry in acl):
            raise ConfigurationError(
                f"the ACL provider must return a non-empty list of kazoo ACLs for {path}"
            )
        return acl


def parse_security(options: Mapping[str, Any]) -> Security:
    auth = _parse_auth(options.get("auth") or ())
    tls = _parse_tls(options.get("tls"))
    sasl = _parse_sasl(options.get("sasl"))
    acl = _parse_acl(options.get("acl", "auto"), has_credentials=bool(auth) or sasl is not None)
    return Security(auth=auth, acl=acl, tls=tls, sasl=sasl)


def _parse_auth(value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigurationError('ZooKeeper option "auth" must be a list of (scheme, credential) pairs')
    pairs = []
    for entry in value:
        if (
            not isinstance(entry, Sequence)
            or isinstance(entry, str)
            or len(entry) != 2
            or not all(isinstance(part, str) and part for part in entry)
        ):
            shown = redact(repr(entry))
            raise ConfigurationError(f'ZooKeeper "auth" entry {shown} is not a (scheme, credential) pair')
        if entry[0] == "sasl":
            raise ConfigurationError('ZooKeeper SASL credentials belong in the "sasl" option, not "auth"')
        pairs.append((entry[0], entry[1]))
    return tuple(pairs)


#: What ``tls`` means unless it says otherwise: verify the server's certificate and its hostname.
TLS_DEFAULTS = {"use_ssl": True, "verify_certs": True, "check_hostname": True}


def _parse_tls(value: object) -> dict[str, Any]:
    if value is None or value is False:
        return {}
    if value is True:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigurationError('ZooKeeper option "tls" must be a dict of kazoo SSL settings')
    unknown = set(value) - TLS_KEYS
    if unknown:
        raise ConfigurationError(
            f'unknown ZooKeeper "tls" settings {sorted(unknown)}; known: {sorted(TLS_KEYS)}'
        )
    if value.get("use_ssl") is False:
        return {}
    tls = {**TLS_DEFAULTS, **value}
    for flag in ("use_ssl", "verify_certs", "check_hostname"):
        if not isinstance(tls[flag], bool):
            raise ConfigurationError(f'ZooKeeper "tls" setting {flag!r} must be True or False')
    if not tls["verify_certs"] and tls["check_hostname"]:
        raise ConfigurationError(
            'ZooKeeper "tls" with "verify_certs": False checks no certificate, so no hostname either: '
            'say "check_hostname": False as well, knowing that any server can then pose as ZooKeeper'
        )
    return tls


def _parse_sasl(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or "mechanism" not in value:
        raise ConfigurationError('ZooKeeper option "sasl" must be a dict of sasl_options with a "mechanism"')
    if importlib.util.find_spec("puresasl") is None:
        raise ConfigurationError(
            'ZooKeeper option "sasl" needs the pure-sasl package (pip install pure-sasl)'
        )
    return dict(value)


def _parse_acl(value: object, *, has_credentials: bool) -> AclProvider:
    if value == "auto":
        return creator_acl if has_credentials else open_acl
    if value == "open":
        return open_acl
    if value == "creator":
        if not has_credentials:
            raise ConfigurationError(
                'ZooKeeper option acl="creator" needs credentials ("auth" or "sasl"): ZooKeeper rejects '
                "creator-only ACLs from unauthenticated clients"
            )
        return creator_acl
    if isinstance(value, str):
        try:
            value = import_dotted(value)
        except ImportError as error:
            raise ConfigurationError(
                'ZooKeeper option "acl" must be "open", "creator", "auto", a callable or its dotted path: '
                f"{error}"
            ) from error
    if not callable(value):
        raise ConfigurationError(f'ZooKeeper option "acl" is not callable: {value!r}')
    provider: AclProvider = value
    return provider
