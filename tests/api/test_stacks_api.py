"""The Heat-compatible API through FastAPI's TestClient, over an embedded runtime.

Each test gets a SQLite file of its own; the app does not drive the dispatcher (so nothing
runs behind the test's back): the test drains it with ``running.wait_for_stack``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "description": "two resources",
    "parameters": {"value": {"type": "string", "default": "one"}},
    "resources": {
        "first": {"type": "OS::Heat::TestResource",
                  "properties": {"value": {"get_param": "value"}}},
        "second": {"type": "OS::Heat::TestResource",
                   "properties": {"value": {"get_attr": ["first", "output"]}}},
    },
    "outputs": {"copied": {"value": {"get_attr": ["second", "output"]},
                           "description": "the copy"}},
}
BASE = "/v1/tenantA"


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'api.db'}"))
    yield runtime


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def drain(rt: Runtime, stack_id: str, tenant: str = "tenantA") -> None:
    running.wait_for_stack(rt, tenant, stack_id, timeout=60)


def create(client: TestClient, name: str = "web", **extra: Any) -> dict[str, Any]:
    body = {"stack_name": name, "template": TEMPLATE, **extra}
    r = client.post(f"{BASE}/stacks", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json()["stack"])


def assert_heat_error(r: Any, code: int, type_: str) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert set(body) == {"code", "title", "explanation", "error"}
    assert body["code"] == code
    assert body["error"]["type"] == type_
    assert body["error"]["traceback"] is None
    return dict(body)


def test_versions_and_health(client: TestClient) -> None:
    for path in ("/", "/v1", "/v1/tenantA"):
        r = client.get(path)
        assert r.status_code == 300
        assert r.json()["versions"][0]["id"] == "v1.0"
        assert r.json()["versions"][0]["links"][0]["href"] == "http://testserver/v1/"
    assert client.get("/healthz").json()["status"] == "ok"  # noauth also says so there


def test_create_show_and_complete(client: TestClient, rt: Runtime) -> None:
    r = client.post(f"{BASE}/stacks", json={"stack_name": "web", "template": TEMPLATE,
                                             "parameters": {"value": "hello"}})
    assert r.status_code == 201
    stack = r.json()["stack"]
    url = f"http://testserver{BASE}/stacks/web/{stack['id']}"
    assert r.headers["location"] == url
    assert stack["links"] == [{"href": url, "rel": "self"}]

    shown = client.get(f"{BASE}/stacks/web/{stack['id']}").json()["stack"]
    assert shown["stack_status"] in ("CREATE_IN_PROGRESS", "CREATE_COMPLETE")
    assert shown["generation"] == 1

    drain(rt, stack["id"])
    shown = client.get(f"{BASE}/stacks/web/{stack['id']}").json()["stack"]
    assert shown["stack_status"] == "CREATE_COMPLETE"
    assert shown["observed_generation"] == 1
    assert shown["description"] == "two resources"
    assert shown["parameters"]["value"] == "hello"
    assert shown["parameters"]["OS::stack_name"] == "web"
    assert shown["outputs"] == [{"output_key": "copied", "output_value": "hello",
                                 "description": "the copy"}]
    assert shown["links"] == [{"href": url, "rel": "self"}]
    assert shown["creation_time"].endswith("Z") and "T" in shown["creation_time"]
    for key in ("id", "stack_name", "stack_status_reason", "updated_time", "timeout_mins",
                "disable_rollback"):
        assert key in shown
    listed = client.get(f"{BASE}/stacks").json()["stacks"]
    assert [s["stack_name"] for s in listed] == ["web"]


def test_lookup_redirects_keep_query_and_method(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    canonical = f"http://testserver{BASE}/stacks/web/{sid}"
    r = client.get(f"{BASE}/stacks/web", follow_redirects=False)
    assert r.status_code == 302 and r.headers["location"] == canonical
    r = client.get(f"{BASE}/stacks/{sid}/events?sort_dir=asc&limit=1", follow_redirects=False)
    assert r.status_code == 302
    assert r.headers["location"] == f"{canonical}/events?sort_dir=asc&limit=1"
    r = client.patch(f"{BASE}/stacks/web", json={"parameters": {"value": "x"}},
                     follow_redirects=False)
    assert r.status_code == 302 and r.headers["location"] == canonical
    r = client.delete(f"{BASE}/stacks/web/resources", follow_redirects=False)
    assert r.status_code == 302 and r.headers["location"] == f"{canonical}/resources"
    assert_heat_error(client.get(f"{BASE}/stacks/nope", follow_redirects=False),
                      404, "EntityNotFound")
    # Re-sent the way keystoneauth/requests follow a 302 (same method and body; httpx itself
    # would turn it into a GET).
    drain(rt, sid)
    body = {"parameters": {"value": "patched"}}
    r = client.patch(f"{BASE}/stacks/web?x=1", json=body, follow_redirects=False)
    assert r.headers["location"] == f"{canonical}?x=1"
    r = client.patch(r.headers["location"], json=body, follow_redirects=False)
    assert r.status_code == 202
    drain(rt, sid)
    shown = client.get(f"{BASE}/stacks/web").json()["stack"]
    assert shown["outputs"][0]["output_value"] == "patched"


def test_updates(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    drain(rt, sid)
    url = f"{BASE}/stacks/web/{sid}"
    body = assert_heat_error(client.put(url, json={"parameters": {"value": "x"}}),
                             400, "HTTPBadRequest")
    assert body["error"]["message"] == "No template specified"
    assert client.get(url).json()["stack"]["generation"] == 1

    r = client.patch(url, json={"parameters": {"value": "two"}, "template": None,
                                "files": {}, "environment": {}})
    assert r.status_code == 202
    drain(rt, sid)
    shown = client.get(url).json()["stack"]
    assert (shown["stack_status"], shown["generation"]) == ("UPDATE_COMPLETE", 2)
    assert shown["outputs"][0]["output_value"] == "two"

    r = client.put(url, json={"template": TEMPLATE, "parameters": {"value": "three"}},
                   headers={"If-Match": "1"})
    assert_heat_error(r, 412, "PreconditionFailed")
    r = client.put(url, json={"template": TEMPLATE, "parameters": {"value": "three"}},
                   headers={"If-Match": "2"})
    assert r.status_code == 202
    drain(rt, sid)
    assert client.get(url).json()["stack"]["outputs"][0]["output_value"] == "three"
    assert_heat_error(client.delete(url, headers={"If-Match": "2"}), 412, "PreconditionFailed")

    # PATCH keeps the given values; clear_parameters puts one back to its default.
    assert client.patch(url, json={"clear_parameters": ["value"]}).status_code == 202
    drain(rt, sid)
    assert client.get(url).json()["stack"]["outputs"][0]["output_value"] == "one"
    assert_heat_error(client.patch(url, json={"clear_parameters": "value"}), 400,
                      "HTTPBadRequest")


def test_conflicts_and_refusals(client: TestClient, rt: Runtime) -> None:
    create(client)
    r = client.post(f"{BASE}/stacks", json={"stack_name": "web", "template": TEMPLATE})
    assert_heat_error(r, 409, "StackExists")

    bad = {"heat_template_version": "2018-08-31",
           "resources": {"a": {"type": "OS::No::Such"},
                         "b": {"type": "OS::Heat::TestResource",
                               "properties": {"no_such_property": 1}}}}
    r = client.post(f"{BASE}/stacks", json={"stack_name": "bad", "template": bad})
    body = assert_heat_error(r, 400, "StackValidationFailed")
    lines = body["error"]["message"].splitlines()
    assert len(lines) >= 2
    assert any("resources.a" in line for line in lines)
    assert any("resources.b" in line for line in lines)
    assert [s["stack_name"] for s in client.get(f"{BASE}/stacks").json()["stacks"]] == ["web"]

    r = client.post(f"{BASE}/stacks", content=b"{not json",
                    headers={"Content-Type": "application/json"})
    assert_heat_error(r, 400, "MalformedRequestBody")


def test_resources_events_outputs_template(client: TestClient, rt: Runtime) -> None:
    sid = create(client, parameters={"value": "v"})["id"]
    drain(rt, sid)
    url = f"{BASE}/stacks/web/{sid}"
    resources = client.get(f"{url}/resources").json()["resources"]
    assert [r["resource_name"] for r in resources] == ["first", "second"]
    first = resources[0]
    assert first["resource_status"] == "CREATE_COMPLETE"
    assert first["resource_type"] == "OS::Heat::TestResource"
    assert first["required_by"] == ["second"]
    assert first["physical_resource_id"]
    for key in ("resource_status_reason", "updated_time", "links", "logical_resource_id"):
        assert key in first
    shown = client.get(f"{url}/resources/second").json()["resource"]
    assert shown["attributes"]["output"] == "v"
    assert_heat_error(client.get(f"{url}/resources/nope"), 404, "EntityNotFound")

    events = client.get(f"{url}/events").json()["events"]
    assert events[0]["resource_name"] == "web" and events[0]["physical_resource_id"] == sid
    assert events[0]["resource_status"] == "CREATE_IN_PROGRESS"
    assert events[-1]["resource_status"] == "CREATE_COMPLETE"
    for key in ("id", "logical_resource_id", "resource_status_reason", "event_time", "links"):
        assert key in events[0]
    newest = client.get(f"{url}/events?limit=1&sort_dir=desc").json()["events"]
    assert [e["id"] for e in newest] == [events[-1]["id"]]
    after = client.get(f"{url}/events?marker={events[0]['id']}").json()["events"]
    assert [e["id"] for e in after] == [e["id"] for e in events[1:]]

    assert client.get(f"{url}/outputs").json() == {
        "outputs": [{"output_key": "copied", "description": "the copy"}]}
    assert client.get(f"{url}/outputs/copied").json()["output"]["output_value"] == "v"
    assert_heat_error(client.get(f"{url}/outputs/nope"), 404, "EntityNotFound")
    assert client.get(f"{url}/template").json() == TEMPLATE


def test_delete(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    drain(rt, sid)
    r = client.delete(f"{BASE}/stacks/web/{sid}")
    assert r.status_code == 204 and r.content == b""
    drain(rt, sid)
    assert client.get(f"{BASE}/stacks/{sid}").json()["stack"]["stack_status"] == \
        "DELETE_COMPLETE"
    assert_heat_error(client.get(f"{BASE}/stacks/web"), 404, "EntityNotFound")
    assert client.get(f"{BASE}/stacks").json()["stacks"] == []


def test_tenant_isolation(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    assert_heat_error(client.get(f"/v1/tenantB/stacks/web/{sid}"), 404, "EntityNotFound")
    assert_heat_error(client.get(f"/v1/tenantB/stacks/{sid}"), 404, "EntityNotFound")
    assert_heat_error(client.delete(f"/v1/tenantB/stacks/web/{sid}"), 404, "EntityNotFound")
    assert client.get("/v1/tenantB/stacks").json()["stacks"] == []
    # The same name is free in another tenant.
    r = client.post("/v1/tenantB/stacks", json={"stack_name": "web", "template": TEMPLATE})
    assert r.status_code == 201


def test_validate(client: TestClient) -> None:
    r = client.post(f"{BASE}/validate", json={"template": TEMPLATE})
    assert r.status_code == 200
    assert r.json()["Parameters"]["value"]["Default"] == "one"
    assert r.json()["Description"] == "two resources"
    r = client.post(f"{BASE}/validate", json={"template": "heat_template_version: 2018-08-31\n"
                                                          "resources: {a: {type: OS::No}}\n"})
    assert_heat_error(r, 400, "StackValidationFailed")


def test_driven_dispatcher(rt: Runtime) -> None:
    """With the driver on, work runs in the background: polling sees the stack complete."""
    import time

    with TestClient(create_app(rt)) as c:
        sid = create(c)["id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = c.get(f"{BASE}/stacks/web/{sid}").json()["stack"]["stack_status"]
            if status != "CREATE_IN_PROGRESS":
                break
            time.sleep(0.05)
        assert status == "CREATE_COMPLETE"
