"""The catalog (resource types, template versions, build info) and the previews."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.ports.views import RecordView
from convergence.runtime import Runtime, open_runtime
from convergence.services import preview
from convergence.settings import Settings
from tests.api.test_stacks_api import BASE, TEMPLATE, assert_heat_error, create, drain


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'catalog.db'}"))


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def test_resource_types(client: TestClient) -> None:
    types = client.get(f"{BASE}/resource_types").json()["resource_types"]
    assert "OS::Heat::TestResource" in types and types == sorted(types)
    assert client.get(f"{BASE}/resource_types?name=OS::Heat::Value").json() == {
        "resource_types": ["OS::Heat::Value"]}
    assert client.get(f"{BASE}/resource_types?name=Random").json()["resource_types"] == [
        "OS::Heat::RandomString"]
    described = client.get(f"{BASE}/resource_types?with_description=true").json()
    assert {"resource_type", "description"} <= set(described["resource_types"][0])

    shown = client.get(f"{BASE}/resource_types/OS::Heat::TestResource").json()
    assert set(shown) >= {"resource_type", "properties", "attributes", "support_status"}
    value = shown["properties"]["value"]
    assert set(value) >= {"type", "description", "required", "update_allowed", "immutable"}
    assert value["type"] == "string"
    assert "output" in shown["attributes"]
    assert shown["support_status"]["status"] == "SUPPORTED"
    assert_heat_error(client.get(f"{BASE}/resource_types/OS::No::Such"), 404, "EntityNotFound")


def test_resource_type_template_is_a_valid_template(client: TestClient) -> None:
    for name in client.get(f"{BASE}/resource_types").json()["resource_types"]:
        r = client.get(f"{BASE}/resource_types/{name}/template")
        assert r.status_code == 200, r.text
        tmpl = r.json()
        (resource,) = tmpl["resources"].values()
        assert resource["type"] == name
        v = client.post(f"{BASE}/validate", json={"template": tmpl})
        # Valid, but for the values of parameters that have no default (no value given).
        if v.status_code != 200:
            lines = v.json()["error"]["message"].splitlines()
            assert all("needs a value" in line for line in lines), (name, v.text)
    r = client.get(f"{BASE}/resource_types/OS::Heat::Value/template?template_type=cfn")
    assert_heat_error(r, 400, "NotSupported")


def test_template_versions_and_functions(client: TestClient) -> None:
    versions = client.get(f"{BASE}/template_versions").json()["template_versions"]
    rocky = {"version": "heat_template_version.2018-08-31", "type": "hot",
             "aliases": ["heat_template_version.rocky"]}
    assert rocky in versions
    r = client.get(f"{BASE}/template_versions/heat_template_version.2018-08-31/functions")
    functions = r.json()["template_functions"]
    names = {f["functions"] for f in functions}
    assert {"get_param", "get_attr", "str_replace", "list_concat"} <= names
    assert "Fn::Join" not in names  # removed in HOT versions after 2013-05-23
    assert all(f["description"] for f in functions)
    with_cond = client.get(f"{BASE}/template_versions/heat_template_version.rocky/functions"
                           "?with_condition_func=true").json()["template_functions"]
    assert "equals" in {f["functions"] for f in with_cond}
    assert_heat_error(client.get(f"{BASE}/template_versions/nope/functions"), 404,
                      "EntityNotFound")


def test_build_info(client: TestClient) -> None:
    info = client.get(f"{BASE}/build_info").json()
    assert info["api"]["revision"] and info["engine"]["revision"]


def test_preview_create(client: TestClient) -> None:
    r = client.post(f"{BASE}/stacks/preview", json={"stack_name": "pre", "template": TEMPLATE,
                                                     "parameters": {"value": "v"}})
    assert r.status_code == 200, r.text
    stack = r.json()["stack"]
    assert stack["stack_name"] == "pre" and stack["description"] == "two resources"
    by_name = {res["resource_name"]: res for res in stack["resources"]}
    assert set(by_name) == {"first", "second"}
    assert by_name["first"]["properties"]["value"] == "v"
    assert by_name["first"]["required_by"] == ["second"]
    assert by_name["first"]["physical_resource_id"] == ""
    assert "unknown" in by_name["second"]["properties"]["value"]
    assert client.get(f"{BASE}/stacks").json()["stacks"] == []  # nothing was created
    bad = {"heat_template_version": "2018-08-31", "resources": {"a": {"type": "OS::No"}}}
    r = client.post(f"{BASE}/stacks/preview", json={"stack_name": "x", "template": bad})
    assert_heat_error(r, 400, "StackValidationFailed")


def test_preview_update(client: TestClient, rt: Runtime) -> None:
    sid = create(client, parameters={"value": "v"})["id"]
    drain(rt, sid)
    url = f"{BASE}/stacks/web/{sid}/preview"
    new = copy.deepcopy(TEMPLATE)
    new["resources"]["third"] = {"type": "OS::Heat::Value", "properties": {"value": "x"}}
    r = client.put(url, json={"template": new, "parameters": {"value": "v"}})
    assert r.status_code == 200, r.text
    changes = r.json()["resource_changes"]
    names = {k: [i["resource_name"] for i in v] for k, v in changes.items()}
    assert names == {"added": ["third"], "updated": [], "replaced": [], "deleted": [],
                     "unchanged": ["first", "second"]}
    first = changes["unchanged"][0]
    assert first["resource_action"] == "CREATE" and first["resource_status"] == "COMPLETE"
    assert first["physical_resource_id"]

    # value is update_allowed: an update; update_replace makes the same change a replacement.
    r = client.patch(url, json={"parameters": {"value": "w"}})
    names = {k: [i["resource_name"] for i in v] for k, v in
             r.json()["resource_changes"].items()}
    assert names["updated"] == ["first"]
    assert names["unchanged"] == ["second"]  # resolved against the current records
    replaced = copy.deepcopy(TEMPLATE)
    replaced["resources"]["first"]["properties"]["update_replace"] = True
    del replaced["resources"]["second"]
    del replaced["outputs"]
    r = client.put(url, json={"template": replaced, "parameters": {"value": "w"}})
    names = {k: [i["resource_name"] for i in v] for k, v in
             r.json()["resource_changes"].items()}
    assert names["replaced"] == ["first"] and names["deleted"] == ["second"]
    # Nothing changed.
    assert client.get(f"{BASE}/stacks/web/{sid}").json()["stack"]["generation"] == 1
    assert_heat_error(client.put(url, json={}), 400, "HTTPBadRequest")


def _record(name: str, props: dict[str, Any], *, type_: str = "T", action: str = "CREATE",
            status: str = "COMPLETE") -> RecordView:
    return RecordView(id=1, stack_id="s", name=name, type=type_, physical_id="p",
                      action=action, status=status, status_reason="", template_id="t",
                      generation=1, requires=(), replaces=None, replaced_by=None,
                      properties=props, attributes={}, reference_id=None, operation=None,
                      fencing_token=0, lease_owner=None, created_at=0.0, updated_at=0.0)


def test_classify_changes_pure() -> None:
    def needs_replace(rtype: str, old: Any, new: Any) -> bool:
        return old.get("fixed") != new.get("fixed")

    current = [_record("same", {"a": 1}), _record("upd", {"a": 1}),
               _record("rep", {"fixed": 1}), _record("gone", {}),
               _record("retype", {}), _record("never", {}, action="INIT"),
               _record("failed", {"a": 1}, action="UPDATE", status="FAILED"),
               _record("badcreate", {"a": 1}, status="FAILED")]
    desired = [preview.DesiredResource("same", "T", {"a": 1}),
               preview.DesiredResource("upd", "T", {"a": 2}),
               preview.DesiredResource("rep", "T", {"fixed": 2}),
               preview.DesiredResource("retype", "U", {}),
               preview.DesiredResource("never", "T", {}),
               preview.DesiredResource("failed", "T", {"a": 1}),
               preview.DesiredResource("badcreate", "T", {"a": 1}),
               preview.DesiredResource("new", "T", {})]
    changes = preview.classify_changes(current, desired, needs_replace)
    assert changes == preview.ResourceChanges(
        added=["never", "new"], updated=["failed", "upd"], replaced=["badcreate", "rep", "retype"],
        deleted=["gone"], unchanged=["same"])
