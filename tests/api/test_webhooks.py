"""Notification webhooks: the subscriptions API and signed, retried, de-duplicated delivery.

The app is served with uvicorn on a thread (``tests.api.test_stream.serve``) over an embedded
runtime, so its webhook deliverer thread runs; a receiver on loopback (``http.server`` on a
thread) answers 500 to the first two attempts of every event and 200 to the third. Loopback is
not a destination webhooks reach by default: the runtime trusts it explicitly
(:data:`LOOPBACK`, ``webhook_allowed_networks``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from convergence.runtime import Runtime, open_runtime
from convergence.services import webhooks
from convergence.settings import Settings
from tests.api.test_stream import TEMPLATE, serve

SECRET = "s3cret-for-tests"
LOOPBACK = ("127.0.0.0/8",)  # the allowed networks of a runtime that delivers to the receiver
FAILURES = 2  # answers 500 this many times per event id, then 200


@dataclass
class Received:
    event_id: str
    signature: str
    body: bytes
    status: int


@dataclass
class Receiver:
    url: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Received] = field(default_factory=list)
    tries: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))

    def delivered(self) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.status == 200]

    def of(self, event_id: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.event_id == event_id]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            rec = made[0]
            event_id = self.headers.get("X-Event-Id") or ""
            with rec.lock:
                rec.tries[event_id] += 1
                status = 500 if rec.tries[event_id] <= FAILURES else 200
                rec.requests.append(Received(event_id, self.headers.get("X-Signature") or "",
                                             body, status))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    made.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'hooks.db'}",
                                webhook_backoff_seconds=0.05, webhook_max_attempts=5,
                                webhook_allowed_networks=LOOPBACK))


@pytest.fixture
def http(rt: Runtime) -> Iterator[httpx.Client]:
    with serve(rt) as base, httpx.Client(base_url=base, timeout=httpx.Timeout(20.0)) as c:
        yield c


def subscribe(http: httpx.Client, url: str, tenant: str = "tenantA",
              **extra: Any) -> dict[str, Any]:
    body = {"url": url, "events": ["orchestration.stack.create.*"], "secret": SECRET, **extra}
    r = http.post(f"/v1/{tenant}/subscriptions", json=body)
    assert r.status_code == 201, r.text
    sub: dict[str, Any] = r.json()["subscription"]
    return sub


def wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_delivered_on_the_third_try_signed_with_a_stable_event_id(
        http: httpx.Client, receiver: Receiver) -> None:
    sub = subscribe(http, receiver.url)
    r = http.post("/v1/tenantA/stacks", json={"stack_name": "hooked", "template": TEMPLATE})
    assert r.status_code == 201, r.text
    stack_id = r.json()["stack"]["id"]

    def types() -> list[str]:
        return [json.loads(x.body)["event_type"] for x in receiver.delivered()]

    wait_for(lambda: "orchestration.stack.create.end" in types())
    assert types() == ["orchestration.stack.create.start", "orchestration.stack.create.end"]
    for got in receiver.delivered():
        tries = receiver.of(got.event_id)
        assert [t.status for t in tries] == [500, 500, 200]  # the third try delivers
        assert len({t.body for t in tries}) == 1  # same id, same body: de-duplicable
        assert webhooks.verify(SECRET, got.body, got.signature)
        assert not webhooks.verify("another secret", got.body, got.signature)
        body = json.loads(got.body)
        assert body["event_id"] == got.event_id
        assert body["timestamp"]
        assert body["payload"]["stack_id"] == stack_id
        assert body["payload"]["stack_name"] == "hooked"
        assert body["payload"]["tenant"] == "tenantA"
        assert body["payload"]["action"] == "CREATE"
        assert body["payload"]["generation"] == 1
    end = json.loads(receiver.delivered()[-1].body)
    assert end["payload"]["status"] == "COMPLETE"

    log = http.get(f"/v1/tenantA/subscriptions/{sub['id']}/deliveries").json()["deliveries"]
    assert [(d["attempts"], d["delivered_at"] is not None, d["last_error"]) for d in log] == \
        [(3, True, ""), (3, True, "")]


def test_only_matching_events_and_stacks_are_delivered(
        rt: Runtime, http: httpx.Client, receiver: Receiver) -> None:
    def complete(tenant: str, name: str) -> bool:
        r = http.get(f"/v1/{tenant}/stacks/{name}", follow_redirects=True)
        return r.status_code == 200 and r.json()["stack"]["stack_status"] == "CREATE_COMPLETE"

    r = http.post("/v1/tenantA/stacks", json={"stack_name": "one", "template": TEMPLATE})
    one = r.json()["stack"]["id"]
    wait_for(lambda: complete("tenantA", "one"))
    # Events committed before a subscription existed are not delivered to it; a stack of
    # another tenant, or another stack than the one asked for, are not either.
    only_one = subscribe(http, receiver.url, stack_id=one)
    ends = subscribe(http, receiver.url, events=["orchestration.stack.create.end"])
    http.post("/v1/tenantB/stacks", json={"stack_name": "other", "template": TEMPLATE})
    r = http.post("/v1/tenantA/stacks", json={"stack_name": "two", "template": TEMPLATE})
    two = r.json()["stack"]["id"]
    wait_for(lambda: complete("tenantB", "other") and complete("tenantA", "two"))
    webhooks.fan_out(rt.store)
    with rt.store.begin() as tx:
        assert tx.deliveries(only_one["id"]) == []
        found = tx.deliveries(ends["id"])
    assert [(d.event_type, d.body["payload"]["stack_id"]) for d in found] == \
        [("orchestration.stack.create.end", two)]


def test_subscriptions_are_tenant_isolated_and_never_show_the_secret(
        http: httpx.Client, receiver: Receiver) -> None:
    sub = subscribe(http, receiver.url)
    assert "secret" not in sub and SECRET not in json.dumps(sub)
    path = f"/v1/tenantA/subscriptions/{sub['id']}"
    shown = http.get(path)
    assert shown.status_code == 200
    assert SECRET not in shown.text and shown.json()["subscription"]["url"] == receiver.url
    listed = http.get("/v1/tenantA/subscriptions")
    assert [s["id"] for s in listed.json()["subscriptions"]] == [sub["id"]]
    assert SECRET not in listed.text

    other = f"/v1/tenantB/subscriptions/{sub['id']}"
    assert http.get("/v1/tenantB/subscriptions").json() == {"subscriptions": []}
    assert http.get(other).status_code == 404
    assert http.get(f"{other}/deliveries").status_code == 404
    gone = http.delete(other)
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "HTTPNotFound"
    assert http.get(path).status_code == 200  # still there

    assert http.delete(path).status_code == 204
    assert http.get(path).status_code == 404
    assert http.get("/v1/tenantA/subscriptions").json() == {"subscriptions": []}


@pytest.mark.parametrize("body", [
    {"events": ["orchestration.stack.create.end"], "secret": "x"},
    {"url": "ftp://x/y", "events": ["orchestration.stack.create.end"], "secret": "x"},
    {"url": "http://x/y", "events": [], "secret": "x"},
    {"url": "http://x/y", "events": ["stack.create"], "secret": "x"},
    {"url": "http://x/y", "events": ["orchestration.stack.create.end"]},
    {"url": "http://x/y", "events": ["orchestration.stack.create.end"], "secret": "x",
     "stack_id": 3},
])
def test_bad_subscriptions_are_refused(http: httpx.Client, body: dict[str, Any]) -> None:
    r = http.post("/v1/tenantA/subscriptions", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "HTTPBadRequest"


def test_backoff_doubles(rt: Runtime) -> None:
    settings = rt.settings.with_(webhook_backoff_seconds=1.0)
    assert [webhooks.backoff(settings, n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]


def test_event_type_names() -> None:
    from convergence.ports.views import EventView

    def ev(action: str, status: str, rtype: str = webhooks.STACK_TYPE) -> EventView:
        return EventView(id=1, stack_id="s", generation=1, resource_name="n",
                         physical_resource_id=None, resource_type=rtype, action=action,
                         status=status, reason="", created_at=0.0)

    assert webhooks.event_type(ev("UPDATE", "IN_PROGRESS")) == "orchestration.stack.update.start"
    assert webhooks.event_type(ev("DELETE", "COMPLETE")) == "orchestration.stack.delete.end"
    assert webhooks.event_type(ev("CREATE", "FAILED")) == "orchestration.stack.create.error"
    assert webhooks.event_type(ev("CREATE", "COMPLETE", "OS::Heat::TestResource")) is None
    assert webhooks.matches(["orchestration.stack.update.*"], "orchestration.stack.update.end")
    assert not webhooks.matches(["orchestration.stack.update.*"],
                                "orchestration.stack.delete.end")
