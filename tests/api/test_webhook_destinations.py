"""Webhooks reach nothing a tenant should not: refused addresses at subscription, every
connection checked on the addresses it goes to, the operator's allowed networks, and failures
stored as classes, never as the connection's words.

No packet leaves for an address other than loopback: the refused URLs that name other
addresses are refused before anything is stored (and no stack is made in those tests), and the
names a delivery resolves here resolve to 127.0.0.1 (``localhost``, or a resolver of the
test's own). Receivers are ``http.server`` threads on 127.0.0.1 that record what reaches them.

Two ways to deliver: the app served with uvicorn (``tests.api.test_stream.serve``), whose own
deliverer thread uses the system resolver; or an app that is not started (a TestClient outside
its lifespan: no deliverer thread) with the test calling ``webhooks.deliver_due`` with a client
of its own (a resolver, a certificate authority or a timeout of its own).
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi.testclient import TestClient
from sqlalchemy import text

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.services import webhook_client, webhooks
from convergence.services.webhook_destinations import Destinations, networks
from convergence.settings import Settings
from tests.api.test_stacks_api import create, drain
from tests.api.test_stream import TEMPLATE, serve
from tests.api.test_webhooks import SECRET, wait_for

LOOPBACK = ("127.0.0.0/8",)
NAME = "hooks.example.test"  # resolved by the tests' own resolver only
ATTEMPTS = 3


@dataclass
class Sink:
    """A receiver: answers ``status`` (with ``location`` for a redirect, ``body`` as its
    text) and records each request's path and ``Host`` header, and the TLS SNI names."""

    port: int = 0
    status: int = 200
    location: str = ""
    body: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[tuple[str, str]] = field(default_factory=list)
    sni: list[str] = field(default_factory=list)

    def seen(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.requests)


@contextlib.contextmanager
def running_sink(tls: ssl.SSLContext | None = None) -> Iterator[Sink]:
    sink = Sink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with sink.lock:
                sink.requests.append((self.path, self.headers.get("Host") or ""))
            self.send_response(sink.status)
            if sink.location:
                self.send_header("Location", sink.location)
            self.send_header("Content-Length", str(len(sink.body)))
            self.end_headers()
            self.wfile.write(sink.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    sink.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def sink() -> Iterator[Sink]:
    with running_sink() as found:
        yield found


def settings(tmp_path: Path, allowed: tuple[str, ...] = ()) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'hooks.db'}",
                    webhook_backoff_seconds=0.05, webhook_max_attempts=ATTEMPTS,
                    webhook_allowed_networks=allowed)


def subscription_rows(rt: Runtime) -> list[tuple[str, str]]:
    with rt.store.engine.connect() as conn:
        return [(r.tenant, r.url) for r in conn.execute(text(
            "SELECT tenant, url FROM subscriptions ORDER BY created_at"))]


def post_subscription(client: httpx.Client | TestClient, url: str) -> httpx.Response:
    return client.post("/v1/tenantA/subscriptions", json={
        "url": url, "events": ["orchestration.stack.create.*"], "secret": SECRET})


def deliveries(client: httpx.Client | TestClient, sub_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/v1/tenantA/subscriptions/{sub_id}/deliveries")
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["deliveries"]
    return found


def given_up(client: httpx.Client | TestClient, sub_id: str) -> bool:
    """Both of a stack create's deliveries made (or tried for the last time)."""
    found = deliveries(client, sub_id)
    return len(found) == 2 and all(d["delivered_at"] is not None or
                                   (d["attempts"] == ATTEMPTS and d["next_attempt_at"] is None)
                                   for d in found)


# At subscription ----------------------------------------------------------------------------

@dataclass
class Refusing:
    """An app served over a runtime with the default policy, and a receiver, shared by the
    cases of one test (none of them stores anything)."""

    rt: Runtime
    http: httpx.Client
    sink: Sink


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Refusing]:
    rt = open_runtime(settings(tmp_path_factory.mktemp("refusing")))
    with running_sink() as found, serve(rt) as base, \
            httpx.Client(base_url=base, timeout=20.0) as http:
        yield Refusing(rt, http, found)


@pytest.mark.parametrize(("url", "kind"), [
    ("http://127.0.0.1:{port}/hook", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[::1]/", "loopback"),
    ("http://[::1]:{port}/hook", "loopback"),
    ("http://10.0.0.1/", "private"),
    ("http://192.168.1.10:8080/", "private"),
    ("http://[fd00::1]/", "private"),
    ("http://[::ffff:127.0.0.1]:{port}/hook", "loopback"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("https://0.0.0.0:{port}/", "unspecified"),
    ("http://2130706433:{port}/hook", "loopback"),  # 127.0.0.1 as one number
    ("http://224.0.0.1/", "multicast"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://100.64.0.1/", "shared"),
    ("http://[fe80::1]/", "link-local"),
])
def test_a_url_naming_an_address_inside_is_refused_and_nothing_is_stored(
        refusing: Refusing, url: str, kind: str) -> None:
    r = post_subscription(refusing.http, url.format(port=refusing.sink.port))
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "HTTPBadRequest"
    assert "'url'" in error["message"] and kind in error["message"]
    assert refusing.http.get("/v1/tenantA/subscriptions").json() == {"subscriptions": []}
    assert subscription_rows(refusing.rt) == []
    assert refusing.sink.seen() == []


def test_an_allowed_network_may_be_named_at_subscription(tmp_path: Path, sink: Sink) -> None:
    rt = open_runtime(settings(tmp_path, LOOPBACK))
    with serve(rt) as base, httpx.Client(base_url=base, timeout=20.0) as http:
        url = f"http://127.0.0.1:{sink.port}/hook"
        assert post_subscription(http, url).status_code == 201
        refused = post_subscription(http, "http://[::1]/")  # 127.0.0.0/8 only
        assert refused.status_code == 400, refused.text
    assert subscription_rows(rt) == [("tenantA", url)]


# At connection ------------------------------------------------------------------------------

@pytest.mark.parametrize("allowed", [(), LOOPBACK], ids=["default", "loopback-allowed"])
def test_a_name_that_resolves_to_loopback_is_refused_at_connection_unless_allowed(
        tmp_path: Path, sink: Sink, allowed: tuple[str, ...]) -> None:
    """``localhost`` passes the subscription's check (a name is not resolved then); the served
    app's deliverer resolves it when it connects, and refuses, or (allowed) delivers."""
    rt = open_runtime(settings(tmp_path, allowed))
    with serve(rt) as base, httpx.Client(base_url=base, timeout=20.0) as http:
        r = post_subscription(http, f"http://localhost:{sink.port}/hook")
        assert r.status_code == 201, r.text
        sub_id = r.json()["subscription"]["id"]
        assert http.post("/v1/tenantA/stacks", json={
            "stack_name": "hooked", "template": TEMPLATE}).status_code == 201
        wait_for(lambda: given_up(http, sub_id))
        log = deliveries(http, sub_id)
    if allowed:
        assert [d["last_error"] for d in log] == ["", ""]
        assert sink.seen() == [("/hook", f"localhost:{sink.port}")] * 2
    else:
        assert [(d["attempts"], d["delivered_at"], d["last_error"]) for d in log] == \
            [(ATTEMPTS, None, webhook_client.DESTINATION_NOT_ALLOWED)] * 2
        assert sink.seen() == []


def resolver(answers: dict[str, list[str]]) -> webhook_client.Resolver:
    """The tests' resolver: only the names given, as given."""
    def resolve(host: str, port: int) -> list[str]:
        return answers[host]
    return resolve


def one_stack_of_deliveries(tmp_path: Path, url: str, allowed: tuple[str, ...] = (),
                            attempts: int = ATTEMPTS) -> tuple[Runtime, TestClient, str]:
    """An app not started (no deliverer thread), a subscription to ``url`` and one stack
    created, whose two deliveries are due: the test delivers them."""
    rt = open_runtime(settings(tmp_path, allowed).with_(webhook_max_attempts=attempts))
    client = TestClient(create_app(rt, drive_dispatcher=False))
    r = post_subscription(client, url)
    assert r.status_code == 201, r.text
    drain(rt, str(create(client, "hooked", template=TEMPLATE)["id"]))
    return rt, client, r.json()["subscription"]["id"]


@pytest.mark.parametrize("allowed", [(), LOOPBACK], ids=["default", "loopback-allowed"])
def test_a_name_rebound_inside_is_refused_and_an_allowed_one_keeps_its_host_header(
        tmp_path: Path, sink: Sink, allowed: tuple[str, ...]) -> None:
    """A name that resolved outside when subscribed resolves to 127.0.0.1 when delivered: the
    connection goes only to an address it checked; the Host header keeps the name."""
    rt, client, sub_id = one_stack_of_deliveries(tmp_path, f"http://{NAME}:{sink.port}/hook",
                                                 allowed, attempts=1)
    http = webhook_client.client(Destinations(networks(allowed)),
                                 resolver=resolver({NAME: ["127.0.0.1"]}))
    with http:
        assert webhooks.deliver_due(rt.store, rt.settings, http) == 2
    log = deliveries(client, sub_id)
    if allowed:
        assert [d["last_error"] for d in log] == ["", ""]
        assert sink.seen() == [("/hook", f"{NAME}:{sink.port}")] * 2
    else:
        assert [d["last_error"] for d in log] == [webhook_client.DESTINATION_NOT_ALLOWED] * 2
        assert sink.seen() == []


def self_signed(name: str) -> tuple[bytes, bytes]:
    """A certificate for the DNS name ``name`` only (its own authority) and its key, PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def test_tls_names_the_urls_host_while_connecting_to_the_checked_address(
        tmp_path: Path) -> None:
    """HTTPS to a name resolved to 127.0.0.1 (allowed): the certificate is checked against
    the name (it names no address) and the receiver is told the name (SNI)."""
    cert, key = self_signed(NAME)
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    trust = ssl.create_default_context(cadata=cert.decode())
    with running_sink(server_tls) as tls_sink:
        def told(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
            tls_sink.sni.append(name or "")
        server_tls.sni_callback = told
        rt, client, sub_id = one_stack_of_deliveries(
            tmp_path, f"https://{NAME}:{tls_sink.port}/hook", LOOPBACK, attempts=1)
        http = webhook_client.client(Destinations(networks(LOOPBACK)), verify=trust,
                                     resolver=resolver({NAME: ["127.0.0.1"]}))
        with http:
            webhooks.deliver_due(rt.store, rt.settings, http)
        assert [d["last_error"] for d in deliveries(client, sub_id)] == ["", ""]
        assert tls_sink.seen() == [("/hook", f"{NAME}:{tls_sink.port}")] * 2
        assert set(tls_sink.sni) == {NAME}


# What a failure stores ----------------------------------------------------------------------

@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port that takes connections (the kernel's backlog) and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def closed_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()  # nothing listens there now: a connection is refused
    return port


@pytest.mark.parametrize(("case", "stored"), [
    ("closed", webhook_client.CONNECTION_FAILED),
    ("silent", webhook_client.TIMED_OUT),
    ("503", "HTTP 503"),
    ("redirect", "HTTP 302"),
])
def test_a_failed_attempt_stores_its_class_not_the_connections_words(
        tmp_path: Path, sink: Sink, case: str, stored: str) -> None:
    """What a tenant reads back tells a closed port from a silent one no more than as a
    class: no address, port or errno. A redirect is not followed (it fails the attempt)."""
    with silent_port() as silent:
        port = {"closed": closed_port(), "silent": silent}.get(case, sink.port)
        sink.status = {"503": 503, "redirect": 302}.get(case, 200)
        sink.body = b"upstream 10.1.2.3:5432 refused: [Errno 111]"
        sink.location = f"http://127.0.0.1:{sink.port}/elsewhere" if case == "redirect" else ""
        rt, client, sub_id = one_stack_of_deliveries(
            tmp_path, f"http://127.0.0.1:{port}/hook", LOOPBACK, attempts=1)
        http = webhook_client.client(Destinations(networks(LOOPBACK)), timeout=0.5)
        with http:
            webhooks.deliver_due(rt.store, rt.settings, http)
    log = deliveries(client, sub_id)
    assert [(d["attempts"], d["last_error"]) for d in log] == [(1, stored)] * 2
    assert sink.seen() == ([("/hook", f"127.0.0.1:{sink.port}")] * 2
                           if case in ("503", "redirect") else [])
