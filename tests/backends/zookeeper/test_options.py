"""Backend options: checked when the backend is built, then the same kazoo settings for every client."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.backends.zookeeper.client import negotiated_timeout, new_client
from django_simba.backends.zookeeper.options import parse_options
from django_simba.spi import ConfigurationError


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"host": "127.0.0.1:2181"}, "unknown ZooKeeper options"),
        ({"hosts": ""}, "hosts"),
        ({"root": "simba"}, "root"),
        ({"root": "/simba/"}, "root"),
        ({"root": "/"}, "root"),
        ({"root": "/a/../b"}, "root"),
        ({"connection_timeout": 0}, "connection_timeout"),
        ({"connection_timeout": "5"}, "connection_timeout"),
        ({"auth": "digest:simba:secret"}, "auth"),
        ({"auth": [("digest",)]}, "auth"),
        ({"auth": [("sasl", "user:pass")]}, "sasl"),
        ({"acl": "creator"}, "needs credentials"),
        ({"acl": "no.such.module.provider"}, "acl"),
        ({"acl": 42}, "acl"),
        ({"tls": {"cafile": "/x"}}, "tls"),
        ({"tls": "yes"}, "tls"),
        ({"sasl": {"username": "u"}}, "mechanism"),
    ],
)
def test_bad_options_are_refused_when_the_backend_is_built(options: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        ZookeeperBackend(options, timeout=5)


def test_defaults() -> None:
    parsed = parse_options({}, timeout=3.0)
    assert parsed.hosts == "127.0.0.1:2181"
    assert parsed.root == "/simba"
    assert parsed.connection_timeout == 3.0
    assert parsed.security.acl_for("/simba/leases/x") == OPEN_ACL_UNSAFE  # the default ACL is open
    assert parsed.security.client_kwargs() == {"auth_data": []}


def test_credentials_make_auto_acl_creator_only() -> None:
    parsed = parse_options({"auth": [("digest", "simba:secret")]}, timeout=5.0)
    assert parsed.security.acl_for("/simba/leases/x") == CREATOR_ALL_ACL
    assert parse_options({"auth": [("digest", "a:b")], "acl": "open"}, timeout=5.0).security.acl_for(
        "/x"
    ) == (OPEN_ACL_UNSAFE)


def test_acl_provider_must_return_acls() -> None:
    parsed = parse_options({"acl": lambda path: ["world:anyone"]}, timeout=5.0)
    with pytest.raises(ConfigurationError, match="ACL"):
        parsed.security.acl_for("/simba/leases/x")


def test_every_client_gets_the_same_security_settings() -> None:
    tls = {"ca": "/etc/ca.pem", "certfile": "/etc/c.pem", "keyfile": "/etc/c.key", "verify_certs": True}
    parsed = parse_options(
        {"hosts": "10.0.0.1:2281,10.0.0.2:2281/chroot", "auth": [("digest", "u:p")], "tls": tls}, timeout=5.0
    )
    client = new_client(parsed, session_timeout=7.5)
    assert client.auth_data == {("digest", "u:p")}
    assert client.use_ssl is True
    assert (client.ca, client.certfile, client.keyfile, client.verify_certs) == (
        "/etc/ca.pem",
        "/etc/c.pem",
        "/etc/c.key",
        True,
    )
    assert client.chroot == "/chroot"
    assert client._session_timeout == 7500  # the lease is the session timeout asked for
    assert negotiated_timeout(client) is None  # known once connected
    assert parse_options({"tls": {"use_ssl": False, "ca": "/x"}}, timeout=5.0).security.client_kwargs() == {
        "auth_data": []
    }


def test_sasl_options_need_pure_sasl_and_reach_every_client() -> None:
    sasl = {"mechanism": "DIGEST-MD5", "username": "u", "password": "p"}
    if importlib.util.find_spec("puresasl") is None:
        with pytest.raises(ConfigurationError, match="pure-sasl"):
            ZookeeperBackend({"sasl": sasl})
        return
    parsed = parse_options({"sasl": sasl}, timeout=5.0)
    assert parsed.security.client_kwargs()["sasl_options"] == sasl
    assert parsed.security.acl_for("/x") == CREATOR_ALL_ACL  # SASL identities count as credentials
