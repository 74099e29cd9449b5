"""Backend options: checked when the backend is built, then the same kazoo settings for every client."""

from __future__ import annotations

import importlib.util
import re
import struct
from typing import Any

import pytest
from django.test import override_settings
from kazoo.protocol.serialization import Connect
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from django_simba import conf
from django_simba.backends.zookeeper import ZookeeperBackend
from django_simba.backends.zookeeper.client import negotiated_timeout, new_client
from django_simba.backends.zookeeper.options import parse_options
from django_simba.checks import check_settings
from django_simba.engine import Engine, EngineConfig
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
        ({"tls": {"verify_certs": False}}, "check_hostname"),
        ({"tls": {"check_hostname": "no"}}, "True or False"),
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


def test_tls_verifies_the_certificate_and_the_hostname_unless_told_by_name() -> None:
    for tls in (True, {"ca": "/etc/ca.pem"}):
        client = new_client(parse_options({"tls": tls}, timeout=5.0), session_timeout=5.0)
        assert (client.use_ssl, client.verify_certs, client.check_hostname) == (True, True, True)
    opted_out = parse_options({"tls": {"check_hostname": False}}, timeout=5.0)
    assert new_client(opted_out, session_timeout=5.0).check_hostname is False
    unverified = parse_options({"tls": {"verify_certs": False, "check_hostname": False}}, timeout=5.0)
    assert new_client(unverified, session_timeout=5.0).verify_certs is False


# -- the longest lease ZooKeeper can carry (issue 22.8) ---------------------------------------------

THIRTY_DAYS = 30 * 86400.0
ZK_RANGE = "at most 2147483 seconds (about 24.9 days) on the zookeeper backend"


def test_the_longest_lease_is_what_kazoos_connect_request_can_carry() -> None:
    longest = ZookeeperBackend.max_lease_duration
    for lease, fits in ((longest, True), (longest + 1, False)):
        client = new_client(parse_options({}, timeout=5.0), session_timeout=lease)
        connect = Connect(0, 0, client._session_timeout, 0, b"\x00" * 16, False)
        try:
            connect.serialize()
        except struct.error:
            assert not fits, f"a lease of {lease} s does not fit kazoo's request"
        else:
            assert fits, f"a lease of {lease} s fits kazoo's request: the bound is too low"


def test_a_lease_zookeeper_cannot_carry_is_refused_at_the_call_without_io() -> None:
    """It passed the checks, then every session open failed at run time, retried for ever."""
    backend = ZookeeperBackend({"hosts": "127.0.0.1:9", "connection_timeout": 0.2}, timeout=0.5)
    try:
        with pytest.raises(ValueError, match=re.escape(ZK_RANGE)):
            backend.open_session(THIRTY_DAYS)
        with pytest.raises(ValueError, match=re.escape(ZK_RANGE)):
            backend.keep_alive("0000000000000001", THIRTY_DAYS)
    finally:
        backend.close()


def test_a_lease_zookeeper_cannot_carry_is_a_check_error_and_refused_by_the_engine() -> None:
    simba = {"BACKEND": "zookeeper", "LEASE_DURATION": THIRTY_DAYS, "RENEW_INTERVAL": 5}
    with override_settings(SIMBA=simba):
        messages = [m for m in check_settings() if m.id == "django_simba.E004"]
        with pytest.raises(ConfigurationError, match="E004"):
            conf.get_settings()
    assert len(messages) == 1 and ZK_RANGE in messages[0].msg, messages
    assert "maxSessionTimeout" in str(messages[0].hint)
    with override_settings(SIMBA={**simba, "LEASE_DURATION": 20 * 86400.0}):
        assert [m.id for m in check_settings()] == []  # within the range: the server may still cap it
    backend = ZookeeperBackend({}, timeout=1)
    with pytest.raises(ConfigurationError, match=re.escape(ZK_RANGE)):
        Engine(backend, EngineConfig(lease_duration=THIRTY_DAYS, renew_interval=5))
    backend.close()
