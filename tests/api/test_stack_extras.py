"""The routes of ``convergence.api.stack_extras``: list filters, environment and files,
export and abandon, event detail, resource events and metadata, mark-unhealthy, signal."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings
from tests.api.test_stacks_api import BASE, TEMPLATE, assert_heat_error, create, drain
from tests.engine.harness import entity_backend


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'api.db'}"))


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


WITH_METADATA: dict[str, Any] = copy.deepcopy(TEMPLATE)
WITH_METADATA["resources"]["first"]["metadata"] = {"role": "db"}


def _created(client: TestClient, rt: Runtime, name: str = "web", **extra: Any) -> str:
    sid = str(create(client, name, **extra)["id"])
    drain(rt, sid)
    return sid


def test_list_filters_sorting_count_and_deleted(client: TestClient, rt: Runtime) -> None:
    ids = {name: _created(client, rt, name) for name in ("b", "a", "c")}
    r = client.delete(f"{BASE}/stacks/c/{ids['c']}")
    assert r.status_code == 204
    drain(rt, ids["c"])

    listed = client.get(f"{BASE}/stacks").json()
    assert [s["stack_name"] for s in listed["stacks"]] == ["a", "b"]  # newest first
    assert "count" not in listed
    counted = client.get(f"{BASE}/stacks?with_count=true&limit=1").json()
    assert counted["count"] == 2 and len(counted["stacks"]) == 1
    assert "marker=" in counted["links"][0]["href"]

    by_name = client.get(f"{BASE}/stacks?sort_keys=stack_name&sort_dir=asc").json()
    assert [s["stack_name"] for s in by_name["stacks"]] == ["a", "b"]
    every = client.get(f"{BASE}/stacks?show_deleted=true&sort_keys=stack_name"
                       "&sort_dir=desc").json()["stacks"]
    assert [(s["stack_name"], s["stack_status"]) for s in every] == [
        ("c", "DELETE_COMPLETE"), ("b", "CREATE_COMPLETE"), ("a", "CREATE_COMPLETE")]
    assert every[0]["deletion_time"] is not None

    def names(query: str) -> list[str]:
        return sorted(s["stack_name"] for s in
                      client.get(f"{BASE}/stacks?{query}").json()["stacks"])

    assert names("name=a&name=b") == ["a", "b"]
    assert names("status=CREATE_COMPLETE") == ["a", "b"]
    assert names("status=COMPLETE&show_deleted=1") == ["a", "b", "c"]
    assert names("action=DELETE&show_deleted=true") == ["c"]
    assert names("action=DELETE") == []
    assert names(f"id={ids['b']}") == ["b"]
    assert_heat_error(client.get(f"{BASE}/stacks?sort_keys=nope"), 400, "HTTPBadRequest")
    assert_heat_error(client.get(f"{BASE}/stacks?sort_dir=up"), 400, "HTTPBadRequest")

    # A deleted stack stays readable by id, DELETE_COMPLETE; its name is free again.
    shown = client.get(f"{BASE}/stacks/c/{ids['c']}").json()["stack"]
    assert shown["stack_status"] == "DELETE_COMPLETE"
    r = client.get(f"{BASE}/stacks/{ids['c']}", follow_redirects=False)
    assert r.status_code == 302
    assert_heat_error(client.get(f"{BASE}/stacks/c"), 404, "EntityNotFound")


def test_environment_and_files(client: TestClient, rt: Runtime) -> None:
    env_file = "parameter_defaults:\n  value: from-file\nresource_registry:\n  My::T: x.yaml\n"
    sid = _created(client, rt, files={"env.yaml": env_file, "x.yaml": "{}"},
                   environment_files=["env.yaml"],
                   environment={"parameters": {"value": "env"}}, parameters={"value": "p"})
    url = f"{BASE}/stacks/web/{sid}"
    env = client.get(f"{url}/environment").json()
    assert env["parameters"] == {"value": "p"}
    assert env["parameter_defaults"] == {"value": "from-file"}
    assert env["resource_registry"] == {"resources": {}, "My::T": "x.yaml"}
    assert env["event_sinks"] == [] and env["encrypted_param_names"] == []
    assert client.get(f"{url}/files").json() == {"env.yaml": env_file, "x.yaml": "{}"}
    # Lookups redirect to these paths.
    r = client.get(f"{BASE}/stacks/web/files", follow_redirects=False)
    assert r.status_code == 302 and r.headers["location"].endswith(f"/web/{sid}/files")


HIDDEN_TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "parameters": {"db_password": {"type": "string", "hidden": True},
                   "shown": {"type": "string"}},
    "resources": {"nested": {"type": "inner.yaml"}},
}
INNER = ("heat_template_version: 2018-08-31\nparameters:\n  inner_secret:\n"
         "    type: string\n    hidden: true\n    default: d\n")


def test_environment_masks_hidden_parameters_as_heat(client: TestClient, rt: Runtime) -> None:
    """Hidden values (of the template's parameters and a nested template's) are masked in
    the environment, whether given as parameters or parameter_defaults; export keeps them."""
    env_file = "parameter_defaults:\n  inner_secret: nested-s3cret\n  shown: default\n"
    sid = _created(client, rt, template=HIDDEN_TEMPLATE,
                   files={"inner.yaml": INNER, "env.yaml": env_file},
                   environment_files=["env.yaml"],
                   parameters={"db_password": "s3cret-pw", "shown": "visible"})
    url = f"{BASE}/stacks/web/{sid}"
    r = client.get(f"{url}/environment")
    assert r.status_code == 200
    env = r.json()
    assert env["parameters"] == {"db_password": "******", "shown": "visible"}
    assert env["parameter_defaults"] == {"inner_secret": "******", "shown": "default"}
    assert "s3cret" not in r.text
    shown = client.get(url).json()["stack"]["parameters"]
    assert shown["db_password"] == "******" and shown["shown"] == "visible"
    exported = client.get(f"{url}/export").json()["environment"]
    assert exported["parameters"]["db_password"] == "s3cret-pw"


def test_export_then_abandon_keeps_the_physical_resources(client: TestClient,
                                                          rt: Runtime) -> None:
    sid = _created(client, rt, template=WITH_METADATA)
    url = f"{BASE}/stacks/web/{sid}"
    exported = client.get(f"{url}/export").json()
    assert {k: exported[k] for k in ("id", "name", "action", "status", "project_id")} == {
        "id": sid, "name": "web", "action": "CREATE", "status": "COMPLETE",
        "project_id": "tenantA"}
    assert exported["template"] == WITH_METADATA
    assert set(exported["environment"]) >= {"parameters", "resource_registry"}
    resources = exported["resources"]
    assert set(resources) == {"first", "second"}
    first = resources["first"]
    assert first["type"] == "OS::Heat::TestResource"
    assert (first["action"], first["status"]) == ("CREATE", "COMPLETE")
    assert first["resource_id"] and first["resource_data"] == {}
    assert first["metadata"] == {"role": "db"} and resources["second"]["metadata"] == {}
    physical = {r["resource_id"] for r in resources.values()}
    assert physical <= set(entity_backend(rt).live())

    r = client.delete(f"{url}/abandon")
    assert r.status_code == 200, r.text
    assert r.json() == exported
    assert physical <= set(entity_backend(rt).live())  # nothing deleted in the cloud
    shown = client.get(url).json()["stack"]
    assert shown["stack_status"] == "DELETE_COMPLETE"
    assert client.get(f"{BASE}/stacks").json()["stacks"] == []
    assert client.get(f"{url}/resources").json() == {"resources": []}
    assert_heat_error(client.delete(f"{url}/abandon"), 404, "EntityNotFound")
    # The name is free for a new stack.
    assert create(client, "web")["id"] != sid


def test_abandon_refused_while_in_progress(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]  # not drained: CREATE_IN_PROGRESS
    assert_heat_error(client.delete(f"{BASE}/stacks/web/{sid}/abandon"), 409,
                      "ActionInProgress")
    drain(rt, sid)


def test_event_detail_and_resource_events(client: TestClient, rt: Runtime) -> None:
    sid = _created(client, rt)
    url = f"{BASE}/stacks/web/{sid}"
    events = client.get(f"{url}/events").json()["events"]
    first_event = next(e for e in events if e["resource_name"] == "first")
    shown = client.get(f"{url}/events/{first_event['id']}").json()["event"]
    assert shown["id"] == first_event["id"]
    assert shown["resource_type"] == "OS::Heat::TestResource"
    assert shown["resource_status"] == first_event["resource_status"]
    assert "resource_properties" in shown
    via_resource = client.get(f"{url}/resources/first/events/{first_event['id']}")
    assert via_resource.json()["event"]["id"] == first_event["id"]
    assert_heat_error(client.get(f"{url}/resources/second/events/{first_event['id']}"), 404,
                      "EntityNotFound")
    assert_heat_error(client.get(f"{url}/events/999999"), 404, "EntityNotFound")
    assert_heat_error(client.get(f"{url}/events/abc"), 404, "EntityNotFound")

    mine = client.get(f"{url}/resources/first/events").json()["events"]
    assert mine and {e["resource_name"] for e in mine} == {"first"}
    assert [e["resource_status"] for e in mine] == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    newest = client.get(f"{url}/resources/first/events?sort_dir=desc&limit=1").json()
    assert [e["id"] for e in newest["events"]] == [mine[-1]["id"]]
    assert_heat_error(client.get(f"{url}/resources/nope/events"), 404, "EntityNotFound")


def test_metadata_and_signal(client: TestClient, rt: Runtime) -> None:
    sid = _created(client, rt, template=WITH_METADATA)
    url = f"{BASE}/stacks/web/{sid}"
    assert client.get(f"{url}/resources/first/metadata").json() == {
        "metadata": {"role": "db"}}
    assert client.get(f"{url}/resources/second/metadata").json() == {"metadata": {}}
    assert_heat_error(client.get(f"{url}/resources/nope/metadata"), 404, "EntityNotFound")
    assert_heat_error(client.post(f"{url}/resources/first/signal", json={"data": 1}), 400,
                      "NotSupported")
    assert_heat_error(client.post(f"{url}/resources/nope/signal", json={}), 404,
                      "EntityNotFound")


def test_mark_unhealthy_then_update_replaces(client: TestClient, rt: Runtime) -> None:
    sid = _created(client, rt)
    url = f"{BASE}/stacks/web/{sid}"
    before = client.get(f"{url}/resources/first").json()["resource"]
    r = client.patch(f"{url}/resources/first",
                     json={"mark_unhealthy": True, "resource_status_reason": "disk gone"})
    assert r.status_code == 200, r.text
    marked = client.get(f"{url}/resources/first").json()["resource"]
    assert marked["resource_status"] == "CHECK_FAILED"
    assert marked["resource_status_reason"] == "disk gone"
    events = client.get(f"{url}/resources/first/events").json()["events"]
    assert events[-1]["resource_status"] == "CHECK_FAILED"

    # Healthy again, then unhealthy by physical id (Heat accepts either).
    client.patch(f"{url}/resources/first", json={"mark_unhealthy": False})
    healthy = client.get(f"{url}/resources/first").json()["resource"]
    assert healthy["resource_status"] == "CHECK_COMPLETE"
    r = client.patch(f"{url}/resources/{before['physical_resource_id']}",
                     json={"mark_unhealthy": "true"})
    assert r.status_code == 200, r.text
    assert client.get(f"{url}/resources/first").json()["resource"]["resource_status"] == \
        "CHECK_FAILED"

    # The next update (same template, nothing changed) replaces the marked resource only.
    r = client.patch(url, json={})
    assert r.status_code == 202, r.text
    drain(rt, sid)
    assert client.get(url).json()["stack"]["stack_status"] == "UPDATE_COMPLETE"
    after = {x["resource_name"]: x for x in
             client.get(f"{url}/resources").json()["resources"]}
    assert after["first"]["resource_status"] == "CREATE_COMPLETE"
    assert after["first"]["physical_resource_id"] != before["physical_resource_id"]
    assert before["physical_resource_id"] not in entity_backend(rt).live()  # old one deleted

    for bad in ({}, {"mark_unhealthy": "maybe"}, {"mark_unhealthy": True, "other": 1},
                {"mark_unhealthy": True, "resource_status_reason": 3}):
        assert_heat_error(client.patch(f"{url}/resources/first", json=bad), 400,
                          "HTTPBadRequest")
    assert_heat_error(client.patch(f"{url}/resources/nope", json={"mark_unhealthy": True}),
                      404, "EntityNotFound")
