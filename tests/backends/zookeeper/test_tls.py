"""TLS against servers of the test's own, with certificates the test made (one CA signs them all).

The server's certificate must name the host the client dialled: one for ``evil.example``,
presented at 127.0.0.1, is refused during the handshake, before kazoo sends any credential.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from django_simba.spi import BackendTimeout, BackendUnavailable
from tests.conftest import server_missing
from tests.servers.zookeeper import HOST, ZookeeperNode, ensure_installed, zookeeper_tls

from .conftest import BackendFactory
from .impostor import TlsImpostor, tls_impostor

pytestmark = pytest.mark.zookeeper

TlsServer = tuple[ZookeeperNode, int, dict[str, str]]
DIGEST = [("digest", "simba:secret")]
#: With credentials, nodes are creator-only: a root of their own, not the open default's /simba
ROOT = f"/simba-tls-{uuid.uuid4().hex[:12]}"
WRONG_NAME = re.escape("certificate is not valid for '127.0.0.1'")


def _tls_server(identity: str) -> Iterator[TlsServer]:
    reason = ensure_installed()
    if reason:
        server_missing(reason)
    try:
        with zookeeper_tls(identity) as started:
            yield started
    except RuntimeError as error:
        server_missing(f"a TLS ZooKeeper ({error})")


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    """Presents a certificate for 127.0.0.1 and localhost."""
    yield from _tls_server("server")


@pytest.fixture(scope="module")
def evil_tls_server() -> Iterator[TlsServer]:
    """Presents a certificate for evil.example, signed by the clients' own CA."""
    yield from _tls_server("evil")


@pytest.fixture
def impostor(tls_server: TlsServer) -> Iterator[TlsImpostor]:
    """At 127.0.0.1, with the evil.example certificate, relaying to the real server's plain port."""
    server, _, files = tls_server
    with tls_impostor(files["evil"], files["evil_key"], server.client_port) as impostor:
        yield impostor


@pytest.fixture
def name() -> str:
    return f"tls.{uuid.uuid4().hex[:12]}"


def client_tls(files: dict[str, str], **settings: Any) -> dict[str, Any]:
    return {"ca": files["ca"], "certfile": files["client"], "keyfile": files["client_key"], **settings}


def test_every_client_speaks_tls(tls_server: TlsServer, make_backend: BackendFactory, name: str) -> None:
    _, port, files = tls_server
    backend = make_backend(f"{HOST}:{port}", tls=client_tls(files))
    sid = backend.open_session(10.0, "over tls").session_id  # a session client
    grant = backend.acquire(sid, name)
    assert grant is not None
    backend.join(sid, name)
    info = backend.owner(name)  # the shared client
    assert info is not None and info.token == grant.token
    assert [m.session_id for m in backend.members(name)] == [sid]
    assert backend.keep_alive(sid, 10.0).owned == {name: grant.token}
    backend.close_session(sid)
    assert backend.owner(name) is None


def test_a_certificate_naming_the_host_dialled_connects(
    tls_server: TlsServer, make_backend: BackendFactory
) -> None:
    _, port, files = tls_server
    for host in (HOST, "localhost"):  # an IP address and a DNS name the certificate lists
        backend = make_backend(f"{host}:{port}", tls=client_tls(files), auth=DIGEST, root=ROOT)
        backend.close_session(backend.open_session(10.0, f"tls to {host}").session_id)


def test_tls_port_refuses_clients_without_a_certificate(
    tls_server: TlsServer, make_backend: BackendFactory
) -> None:
    _, port, files = tls_server
    for options in ({"tls": {"ca": files["ca"]}}, {}):
        backend = make_backend(f"{HOST}:{port}", timeout=1.0, **options)
        with pytest.raises((BackendTimeout, BackendUnavailable)):
            backend.open_session(10.0, "refused")


def test_an_impostor_for_another_host_gets_no_credentials(
    impostor: TlsImpostor, make_backend: BackendFactory, tls_server: TlsServer
) -> None:
    files = tls_server[2]
    backend = make_backend(impostor.hosts, timeout=2.0, tls=client_tls(files), auth=DIGEST, root=ROOT)
    with pytest.raises(BackendTimeout, match=WRONG_NAME):
        backend.open_session(10.0, "fooled?")
    with pytest.raises(BackendTimeout, match=WRONG_NAME):
        backend.owner("anything")  # the shared client too
    assert impostor.refused >= 2 and impostor.handshakes == 0
    assert impostor.received() == b""  # not a byte, credentials least of all


def test_only_check_hostname_false_named_lets_the_impostor_in(
    impostor: TlsImpostor, make_backend: BackendFactory, tls_server: TlsServer
) -> None:
    """What the opt-out costs: the impostor completes the handshake and reads the credentials."""
    files = tls_server[2]
    backend = make_backend(
        impostor.hosts,
        timeout=5.0,
        tls=client_tls(files, check_hostname=False),
        auth=DIGEST,
        root=f"{ROOT}-relayed",  # the relay reaches the plain port: no certificate identity there
    )
    backend.close_session(backend.open_session(10.0, "fooled").session_id)
    assert impostor.handshakes >= 1
    assert b"simba:secret" in impostor.received()


def test_a_zookeeper_presenting_a_certificate_for_another_host_is_refused(
    evil_tls_server: TlsServer, make_backend: BackendFactory
) -> None:
    _, port, files = evil_tls_server
    backend = make_backend(f"{HOST}:{port}", timeout=2.0, tls=client_tls(files), auth=DIGEST, root=ROOT)
    with pytest.raises(BackendTimeout, match=WRONG_NAME):
        backend.open_session(10.0, "refused")
    # the same server, dialled by the name its certificate gives, would be trusted: the check is
    # on the name alone (evil.example does not resolve here, so this is as far as it goes)
