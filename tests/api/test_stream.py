"""The events watch stream (SSE) and the long-poll event list, against a real HTTP server.

Starlette's TestClient buffers a whole response, so an endless stream cannot be read through
it: each test serves the app with uvicorn on a thread (over an embedded runtime on a SQLite
file, the dispatcher driven in the background by the app) and talks to it with httpx.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from convergence.api import stream
from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "parameters": {"value": {"type": "string", "default": "one"}},
    "resources": {
        "first": {"type": "OS::Heat::TestResource",
                  "properties": {"value": {"get_param": "value"}}},
        "second": {"type": "OS::Heat::TestResource",
                   "properties": {"value": {"get_attr": ["first", "output"]}}},
        "third": {"type": "OS::Heat::TestResource",
                  "properties": {"value": {"get_attr": ["second", "output"]}}},
    },
}


@dataclass
class Message:
    id: int
    event: str
    data: dict[str, Any]


@contextmanager
def serve(rt: Runtime, app: FastAPI | None = None) -> Iterator[str]:
    """The app over ``rt`` (``app`` when given) served on a free local port; yields its base
    URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app or create_app(rt), log_level="warning",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'stream.db'}"))


@pytest.fixture
def app(rt: Runtime) -> FastAPI:
    return create_app(rt)


@pytest.fixture
def base(rt: Runtime, app: FastAPI) -> Iterator[str]:
    with serve(rt, app) as url:
        yield url


@pytest.fixture
def http(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=httpx.Timeout(20.0)) as c:
        yield c


def create(http: httpx.Client, name: str, tenant: str = "tenantA") -> str:
    r = http.post(f"/v1/{tenant}/stacks", json={"stack_name": name, "template": TEMPLATE})
    assert r.status_code == 201, r.text
    return str(r.json()["stack"]["id"])


def stack_path(tenant: str, name: str, stack_id: str) -> str:
    return f"/v1/{tenant}/stacks/{name}/{stack_id}"


def listed(http: httpx.Client, path: str) -> list[dict[str, Any]]:
    r = http.get(f"{path}/events")
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def read_stream(http: httpx.Client, url: str, until: Callable[[Message], bool],
                headers: dict[str, str] | None = None,
                comments: list[str] | None = None) -> list[Message]:
    """The stream's messages up to the first one ``until`` accepts (then disconnects)."""
    got: list[Message] = []
    with http.stream("GET", url, headers=headers) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in r.iter_lines():
            if line.startswith(":"):
                if comments is not None:
                    comments.append(line)
                continue
            if line:
                key, _, value = line.partition(":")
                fields[key] = value[1:] if value.startswith(" ") else value
                continue
            if "data" in fields:
                msg = Message(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                got.append(msg)
                if until(msg):
                    return got
            fields = {}
    raise AssertionError("the stream ended")


def is_complete(stack_id: str) -> Callable[[Message], bool]:
    def done(m: Message) -> bool:
        return m.event == "stack.status" and m.data["physical_resource_id"] == stack_id and \
            m.data["resource_status"] == "CREATE_COMPLETE"
    return done


def wait_complete(http: httpx.Client, path: str) -> None:
    deadline = time.monotonic() + 30
    while http.get(path).json()["stack"]["stack_status"] != "CREATE_COMPLETE":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_stream_sees_every_event_of_a_create_in_order(app: FastAPI, http: httpx.Client) -> None:
    got: list[Message] = []
    created: list[str] = []

    def watch() -> None:
        got.extend(read_stream(http, "/v1/tenantA/events?watch=true",
                               lambda m: bool(created) and is_complete(created[0])(m)))

    # The project stream is connected before the stack exists: its events are pushed live.
    reader = threading.Thread(target=watch)
    reader.start()
    time.sleep(0.3)
    created.append(create(http, "web"))
    reader.join(30)
    assert not reader.is_alive()
    stack_id = created[0]
    path = stack_path("tenantA", "web", stack_id)

    events = listed(http, path)
    assert [m.data for m in got] == events  # same JSON as the list, every one, in order
    assert [m.id for m in got] == sorted({m.id for m in got})
    assert got[0].event == "stack.status" and got[0].data["resource_status"] == \
        "CREATE_IN_PROGRESS"
    assert got[-1].data["resource_status"] == "CREATE_COMPLETE"
    assert {m.data["resource_name"] for m in got if m.event == "resource.status"} == \
        {"first", "second", "third"}
    assert app.state.notifier.notified > 0  # the engine's commits woke the stream

    # The stack's own stream, connected afterwards, replays the same events.
    again = read_stream(http, f"{path}/events?watch=true", is_complete(stack_id))
    assert [m.data for m in again] == events


def test_reconnecting_with_last_event_id_resumes_without_gaps(http: httpx.Client) -> None:
    stack_id = create(http, "web")
    path = stack_path("tenantA", "web", stack_id)
    first = read_stream(http, f"{path}/events?watch=true", lambda m: True)
    assert len(first) == 1
    second = read_stream(http, f"{path}/events?watch=true", is_complete(stack_id),
                         headers={"Last-Event-ID": str(first[-1].id)})
    ids = [m.id for m in first + second]
    assert ids == sorted(set(ids))
    assert [m.data for m in first + second] == listed(http, path)
    # ``marker`` does the same, and Last-Event-ID (a reconnection) wins over it.
    by_marker = read_stream(http, f"{path}/events?watch=true&marker={ids[1]}",
                            is_complete(stack_id))
    assert [m.id for m in by_marker] == ids[2:]
    by_header = read_stream(http, f"{path}/events?watch=true&marker={ids[0]}",
                            is_complete(stack_id), headers={"Last-Event-ID": str(ids[2])})
    assert [m.id for m in by_header] == ids[3:]


def read_progress(http: httpx.Client, url: str,
                  until: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The progress stream's messages (each a ``stack.progress`` without an id) up to the
    first one ``until`` accepts."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    with http.stream("GET", url) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in r.iter_lines():
            assert time.monotonic() < deadline, got  # a keepalive comes every 15 s at least
            if line.startswith(":") or line.startswith("retry:"):
                continue
            if line:
                key, _, value = line.partition(":")
                fields[key] = value[1:] if value.startswith(" ") else value
                continue
            if fields:
                assert set(fields) == {"event", "data"} and fields["event"] == "stack.progress"
                got.append(json.loads(fields["data"]))
                if until(got[-1]):
                    return got
            fields = {}
    raise AssertionError("the stream ended")


def settled(progress: dict[str, Any]) -> bool:
    """The progress tells that the stack's latest request finished."""
    return progress["status"] in ("COMPLETE", "FAILED") and \
        progress["observed_generation"] == progress["generation"]


def test_a_stacks_progress_is_its_requests_counters_once_or_as_a_stream(
        http: httpx.Client) -> None:
    stack_id = create(http, "web")
    path = stack_path("tenantA", "web", stack_id)
    got = read_progress(http, f"{path}/progress?watch=true", settled)
    remaining = [p["nodes_remaining"] for p in got]
    assert remaining == sorted(remaining, reverse=True)  # counted down
    assert all(a != b for a, b in pairwise(got))  # only changes are sent
    end = got[-1]
    assert end == {
        "stack_id": stack_id, "stack_name": "web", "action": "CREATE", "status": "COMPLETE",
        "stack_status": "CREATE_COMPLETE",
        "stack_status_reason": "Stack CREATE completed successfully",
        "generation": 1, "observed_generation": 1, "traversal_id": end["traversal_id"],
        "nodes_total": 3, "nodes_remaining": 0, "nodes_failed": 0, "in_progress": []}
    assert isinstance(end["traversal_id"], str)
    # Once, as JSON; by the stack's name alone, a lookup redirect as for the other routes.
    assert http.get(f"{path}/progress").json() == {"progress": end}
    looked = http.get("/v1/tenantA/stacks/web/progress", follow_redirects=True)
    assert looked.json() == {"progress": end}

    # An update that fails: its failure counted.
    r = http.patch(path, json={"disable_rollback": True, "template": {
        **TEMPLATE, "resources": {**TEMPLATE["resources"], "third": {
            "type": "OS::Heat::TestResource", "properties": {"fail": True}}}}})
    assert r.status_code == 202, r.text
    failed = read_progress(http, f"{path}/progress?watch=true", settled)[-1]
    assert (failed["stack_status"], failed["generation"], failed["observed_generation"]) == \
        ("UPDATE_FAILED", 2, 2)
    assert failed["nodes_failed"] == 1 and failed["nodes_remaining"] == 0


def test_heartbeat_comment(http: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "HEARTBEAT_SECONDS", 0.2)
    stack_id = create(http, "web")
    path = stack_path("tenantA", "web", stack_id)
    wait_complete(http, path)
    comments: list[str] = []
    # The stack's stream replays its events, then stays quiet: a marker past the end shows
    # only heartbeats, so read the replay, then a fresh stream from the last id.
    last = listed(http, path)[-1]["id"]
    with http.stream("GET", f"{path}/events?watch=true",
                     headers={"Last-Event-ID": last}) as r:
        for line in r.iter_lines():
            if line.startswith(":"):
                comments.append(line)
                break
    assert comments == [": keepalive"]


def test_a_tenant_stream_excludes_other_tenants(http: httpx.Client) -> None:
    other = create(http, "web", tenant="tenantB")
    wait_complete(http, stack_path("tenantB", "web", other))
    mine = create(http, "web", tenant="tenantA")
    got = read_stream(http, "/v1/tenantA/events?watch=true", is_complete(mine))
    assert got and {m.data["links"][2]["href"].rsplit("/", 1)[1] for m in got} == {mine}
    assert all("/v1/tenantA/" in m.data["links"][0]["href"] for m in got)
    theirs = read_stream(http, "/v1/tenantB/events?watch=true", is_complete(other))
    assert {m.data["links"][2]["href"].rsplit("/", 1)[1] for m in theirs} == {other}
    # The plain project list agrees.
    listed_a = http.get("/v1/tenantA/events").json()["events"]
    assert [e["id"] for e in listed_a] == [str(m.id) for m in got]


def test_long_poll_returns_when_an_event_arrives(http: httpx.Client) -> None:
    stack_id = create(http, "web")
    path = stack_path("tenantA", "web", stack_id)
    wait_complete(http, path)
    last = listed(http, path)[-1]["id"]
    answer: dict[str, Any] = {}

    def poll() -> None:
        started = time.monotonic()
        r = http.get(f"{path}/events", params={"marker": last, "wait": "30"})
        answer.update(status=r.status_code, body=r.json(), took=time.monotonic() - started)

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.5)
    assert poller.is_alive()  # nothing newer yet: it waits
    r = http.patch(f"{path}", json={"parameters": {"value": "two"}})
    assert r.status_code == 202, r.text
    poller.join(30)
    assert answer["status"] == 200
    assert answer["took"] < 10
    events = answer["body"]["events"]
    assert events and all(int(e["id"]) > int(last) for e in events)
    assert events[0]["resource_status"] == "UPDATE_IN_PROGRESS"


def test_project_long_poll_returns_when_a_stack_is_created(http: httpx.Client) -> None:
    answer: dict[str, Any] = {}

    def poll() -> None:
        answer["events"] = http.get("/v1/tenantA/events", params={"wait": "30"}).json()[
            "events"]

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.3)
    assert poller.is_alive()
    create(http, "other", tenant="tenantB")  # not this tenant's: keeps waiting
    time.sleep(0.5)
    assert poller.is_alive()
    create(http, "web")
    poller.join(30)
    assert answer["events"] and answer["events"][0]["resource_status"] == "CREATE_IN_PROGRESS"


def test_long_poll_returns_empty_after_the_wait(http: httpx.Client) -> None:
    stack_id = create(http, "web")
    path = stack_path("tenantA", "web", stack_id)
    wait_complete(http, path)
    last = listed(http, path)[-1]["id"]
    started = time.monotonic()
    r = http.get(f"{path}/events", params={"marker": last, "wait": "1"})
    took = time.monotonic() - started
    assert r.status_code == 200 and r.json() == {"events": []}
    assert 0.9 <= took < 5
    # Without a newer event pending, an old marker answers at once with the normal list.
    r = http.get(f"{path}/events", params={"marker": "0", "wait": "30", "limit": "2"})
    assert len(r.json()["events"]) == 2


def test_bad_parameters(http: httpx.Client) -> None:
    stack_id = create(http, "web")
    path = stack_path("tenantA", "web", stack_id)
    assert http.get(f"{path}/events", params={"wait": "soon"}).status_code == 400
    assert http.get("/v1/tenantA/events", params={"marker": "x"}).status_code == 400
    assert stream.wait_seconds("1000") == stream.MAX_WAIT_SECONDS
    assert stream.wait_seconds("-3") == 0.0
