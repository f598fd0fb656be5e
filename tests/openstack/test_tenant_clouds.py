"""A stack reaches a cloud only with credentials of its own tenant, never the engine's: in
token mode the cloud the operator mapped to the project (none mapped: no cloud, and a template
that needs one refused, naming the setting); in keystone mode a trust from a caller whose
token is scoped to the stack's project (an admin acting for another project delegates nothing,
and its stack gets no cloud; a member's later update gives it the trust)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openstack
import yaml
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.plugins.base import NO_CLOUD
from convergence.services import queries, running
from tests.engine.harness import hot
from tests.openstack import test_clouds
from tests.openstack.test_clouds import TEMPLATE, Place, keystone_api, runtime

place = test_clouds.place  # the simulated cloud with the engine's user and alice's project

NO_CLOUD_TEMPLATE = hot("""
word:
  type: OS::Heat::RandomString
""")
PORT_ON = ("heat_template_version: 2018-08-31\nresources:\n  p:\n"
           "    type: OS::Neutron::Port\n    properties: {network: NET}\n")


def _token_api(tmp_path: Path, place: Place, project_clouds: dict[str, tuple[str, ...]]
               ) -> tuple[Any, TestClient]:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({
        "tok-a": {"project": "tenant-a", "roles": ["member"]},
        "tok-b": {"project": "tenant-b", "roles": ["member"]},
    }))
    rt = runtime(tmp_path, place, auth="token", tokens_file=str(tokens),
                 project_clouds=project_clouds)
    return rt, TestClient(create_app(rt, drive_dispatcher=False))


def _objects(place: Place) -> dict[str, list[str]]:
    """The projects owning each kind of object in the simulated cloud."""
    with place.state.locked():
        return {kind: sorted(str(o.get("project_id") or o.get("tenant_id"))
                             for o in place.state.kind(kind).values())
                for kind in ("network", "server", "port")}


def test_token_mode_a_project_with_no_cloud_mapped_gets_none(tmp_path: Path,
                                                            place: Place) -> None:
    rt, client = _token_api(tmp_path, place, {"tenant-a": ("blue",)})
    before = _objects(place)
    with client as c:
        # tenant-b has no cloud: its template that needs one is refused, naming the setting;
        # nothing is stored and the engine's own cloud ("engine", OS_CLOUD) is not touched.
        r = c.post("/v1/tenant-b/stacks", headers={"X-Auth-Token": "tok-b"},
                   json={"stack_name": "s", "template": TEMPLATE})
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert message.startswith("resources.net.type: OS::Neutron::Net needs a cloud")
        assert "CONVERGENCE_PROJECT_CLOUDS" in message
        assert queries.list_stacks(rt, "tenant-b") == []
        # ... nor may it name another project's cloud.
        r = c.post("/v1/tenant-b/stacks", headers={"X-Auth-Token": "tok-b"},
                   json={"stack_name": "s", "template": TEMPLATE, "cloud": "blue"})
        assert r.status_code == 403, r.text
        # A template that needs no cloud is fine: the stack is kept cloudless.
        r = c.post("/v1/tenant-b/stacks", headers={"X-Auth-Token": "tok-b"},
                   json={"stack_name": "words", "template": NO_CLOUD_TEMPLATE})
        assert r.status_code == 201, r.text
        sid = r.json()["stack"]["id"]
        assert running.wait_for_stack(rt, "tenant-b", sid).stack_status == "CREATE_COMPLETE"
        assert queries.get_stack(rt, "tenant-b", sid).cloud == NO_CLOUD
        # Adding a server to it later is refused the same way.
        r = c.put(f"/v1/tenant-b/stacks/words/{sid}", headers={"X-Auth-Token": "tok-b"},
                  json={"template": TEMPLATE})
        assert r.status_code == 400 and "CONVERGENCE_PROJECT_CLOUDS" in r.text
        assert _objects(place) == before

        # tenant-a's stack lives in the cloud mapped to it: alice's project, not the engine's.
        r = c.post("/v1/tenant-a/stacks", headers={"X-Auth-Token": "tok-a"},
                   json={"stack_name": "a", "template": TEMPLATE})
        assert r.status_code == 201, r.text
        done = running.wait_for_stack(rt, "tenant-a", r.json()["stack"]["id"])
        assert done.stack_status == "CREATE_COMPLETE"
    blue = place.project("blue")
    assert place.projects_of("server") == [blue]
    assert list(place.engine.compute.servers()) == []
    rt.store.engine.dispose()


def test_token_mode_a_tenant_cannot_reach_anothers_network(tmp_path: Path,
                                                         place: Place) -> None:
    # tenant-a's cloud is alice's project, tenant-b's the engine user's: a port of tenant-b's
    # on tenant-a's network (by name) finds no such network, at acceptance.
    place.alice.network.create_network(name="a-private")
    rt, client = _token_api(tmp_path, place, {"tenant-a": ("blue",),
                                              "tenant-b": ("engine",)})
    with client as c:
        r = c.post("/v1/tenant-b/stacks", headers={"X-Auth-Token": "tok-b"},
                   json={"stack_name": "probe", "template": PORT_ON.replace("NET", "a-private")})
        assert r.status_code == 400, r.text
        assert "network 'a-private' not found" in r.json()["error"]["message"]
        r = c.post("/v1/tenant-a/stacks", headers={"X-Auth-Token": "tok-a"},
                   json={"stack_name": "own", "template": PORT_ON.replace("NET", "a-private")})
        assert r.status_code == 201, r.text
        done = running.wait_for_stack(rt, "tenant-a", r.json()["stack"]["id"])
        assert done.stack_status == "CREATE_COMPLETE"
    assert queries.list_stacks(rt, "tenant-b") == []
    assert [p["project_id"] for p in place.state.kind("port").values()] == [
        place.project("blue")]
    rt.store.engine.dispose()


def _admin(place: Place) -> Any:
    return openstack.connect(auth_url=place.url + "/v3", username="admin", password="admin",
                             project_name="admin", user_domain_name="Default",
                             project_domain_name="Default", region_name="RegionOne")


def test_keystone_an_admin_for_another_project_gets_no_engine_credentials(
        tmp_path: Path, place: Place) -> None:
    rt = runtime(tmp_path, place, auth="keystone")
    blue = place.project("blue")
    admin = _admin(place)
    before = _objects(place)
    with keystone_api(rt, place) as c:
        as_admin = {"X-Auth-Token": admin.auth_token}
        # The admin's token is scoped to its own project: no trust into blue can be made, and
        # the engine's own credentials are never used instead.
        r = c.post(f"/v1/{blue}/stacks", headers=as_admin,
                   json={"stack_name": "s", "template": TEMPLATE})
        assert r.status_code == 403, r.text
        assert "not scoped to the stack's project" in r.json()["error"]["message"]
        assert queries.list_stacks(rt, blue) == [] and place.trusts() == []
        assert _objects(place) == before
        # A stack that needs no cloud is accepted, cloudless.
        r = c.post(f"/v1/{blue}/stacks", headers=as_admin,
                   json={"stack_name": "words", "template": NO_CLOUD_TEMPLATE})
        assert r.status_code == 201, r.text
        sid = r.json()["stack"]["id"]
        assert running.wait_for_stack(rt, blue, sid).stack_status == "CREATE_COMPLETE"
        assert queries.get_stack(rt, blue, sid).cloud == NO_CLOUD
        # A member of blue adds servers to it: the update gives the stack alice's trust, and
        # what it makes is blue's, none of it in the engine's own project.
        r = c.put(f"/v1/{blue}/stacks/words/{sid}",
                  headers={"X-Auth-Token": place.alice.auth_token},
                  json={"template": TEMPLATE})
        assert r.status_code == 202, r.text
        done = running.wait_for_stack(rt, blue, sid)
        assert done.stack_status == "UPDATE_COMPLETE", [
            (e.resource_name, e.status, e.reason) for e in queries.list_events(rt, blue, sid)]
        stack = queries.get_stack(rt, blue, sid)
        assert stack.trust_id is not None and stack.cloud is None
    assert place.projects_of("server") == [blue]
    assert list(place.engine.compute.servers()) == []
    assert [t["project_id"] for t in place.trusts()] == [blue]
    admin.close()
    rt.store.engine.dispose()
