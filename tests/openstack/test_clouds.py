"""Whose cloud a stack lives in: another ``clouds.yaml`` entry named at create
(``--os-cloud``), and, with Keystone authenticating the API, the caller's own project through
a trust the caller gives the engine, which outlives the caller's token and is deleted with the
stack. Credentials reach no log, event, API answer or stored row."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openstack
import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.api.auth import KeystoneTokens
from convergence.plugins.base import CloudScope
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries, running, stacks
from convergence.settings import Settings
from convergence.template import TemplateError
from convergence_simcloud.seed import Seed, SeedUser
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.engine.harness import hot

ENGINE_PASSWORD = "engine-Pa55-do-not-leak"
ALICE_PASSWORD = "alice-Pa55-do-not-leak"
TEMPLATE = hot("""
net:
  type: OS::Neutron::Net
  properties: {name: blue-net}
sub:
  type: OS::Neutron::Subnet
  properties: {network: {get_resource: net}, cidr: 10.1.0.0/24}
server:
  type: OS::Nova::Server
  properties:
    flavor: m1.tiny
    image: cirros
    networks: [{network: {get_resource: net}}]
""")


def clouds_yaml(url: str) -> str:
    def entry(name: str, user: str, password: str, project: str) -> str:
        return (f"  {name}:\n    region_name: RegionOne\n    identity_api_version: 3\n"
                f"    auth:\n      auth_url: {url}/v3\n      username: {user}\n"
                f"      password: {password}\n      project_name: {project}\n"
                "      user_domain_name: Default\n      project_domain_name: Default\n")
    return ("clouds:\n" + entry("engine", "convergence", ENGINE_PASSWORD, "service")
            + entry("blue", "alice", ALICE_PASSWORD, "blue"))


class Place:
    """The simulated cloud with an engine user (project ``service``) and a tenant user, alice
    (project ``blue``), and a connection of each's own."""

    def __init__(self, state: SimCloud, url: str, clouds_file: Path) -> None:
        self.state, self.url, self.clouds_file = state, url, clouds_file
        self.alice = self.connect("blue")
        self.engine = self.connect("engine")

    def connect(self, cloud: str) -> Any:
        from openstack.config import loader

        region = loader.OpenStackConfig(config_files=[str(self.clouds_file)],
                                        load_envvars=False).get_one(cloud=cloud)
        return openstack.connection.Connection(config=region)

    def project(self, name: str) -> str:
        with self.state.locked():
            return str(self.state.find("projects", name=name)["id"])

    def projects_of(self, kind: str) -> list[str]:
        with self.state.locked():
            return sorted(str(o.get("project_id") or o.get("tenant_id"))
                          for o in self.state.kind(kind).values()
                          if kind != "network" or o.get("name") == "blue-net")

    def trusts(self) -> list[dict[str, Any]]:
        with self.state.locked():
            return list(self.state.table("trusts").values())


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    seed = Seed(projects=["admin", "service", "blue"], users=[
        SeedUser("admin", "admin", {"admin": ["admin", "member", "reader"]}),
        # the engine's user: the service role lets it validate its callers' tokens
        SeedUser("convergence", ENGINE_PASSWORD, {"service": ["member", "service"]}),
        SeedUser("alice", ALICE_PASSWORD, {"blue": ["member", "reader"]})])
    state = SimCloud(seed=seed, options=Options(build_seconds=5.0))
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        found = Place(state, url, path)
        yield found
        found.alice.close()
        found.engine.close()


def runtime(tmp_path: Path, place: Place, **settings: Any) -> Runtime:
    return open_runtime(
        Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", **settings),
        clock=ManualClock(time.time()),
        environ={"OS_CLOUD": "engine", "OS_CLIENT_CONFIG_FILE": str(place.clouds_file)})


def keystone_api(rt: Runtime, place: Place) -> TestClient:
    """The API over ``rt`` authenticating callers with the simulated cloud's Keystone (the
    engine's own token validating theirs)."""
    service = KeystoneTokens(place.url + "/v3", place.engine.auth_token)
    return TestClient(create_app(rt, drive_dispatcher=False, authenticator=service))


def test_a_stack_named_cloud_holds_its_resources(tmp_path: Path, place: Place) -> None:
    rt = runtime(tmp_path, place)
    with pytest.raises(TemplateError) as caught:
        stacks.create_stack(rt, "t", "nowhere", TEMPLATE, scope=CloudScope(cloud="nope"))
    assert str(caught.value.problems[0]).startswith(
        "cloud: no clouds.yaml has a cloud named 'nope'")
    assert queries.list_stacks(rt, "t") == []

    stack = stacks.create_stack(rt, "t", "blue", TEMPLATE, scope=CloudScope(cloud="blue"))
    done = running.wait_for_stack(rt, "t", stack.id)
    assert done.stack_status == "CREATE_COMPLETE", [
        (e.resource_name, e.action, e.status, e.reason)
        for e in queries.list_events(rt, "t", stack.id)]
    blue = place.project("blue")
    assert place.projects_of("network") == [blue] and place.projects_of("server") == [blue]
    assert len(list(place.alice.compute.servers())) == 1  # alice's own
    assert list(place.engine.compute.servers()) == []

    stacks.delete_stack(rt, "t", "blue")
    assert running.wait_for_stack(rt, "t", stack.id).stack_status == "DELETE_COMPLETE"
    assert place.projects_of("network") == [] and place.projects_of("server") == []
    rt.store.engine.dispose()


def test_keystone_callers_stacks_live_in_their_project_through_a_trust(
        tmp_path: Path, place: Place, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    rt = runtime(tmp_path, place, auth="keystone")
    blue = place.project("blue")
    alice_token = place.alice.auth_token
    answers: list[str] = []
    # A network only alice's project has: the template naming it is checked in her project.
    place.alice.network.create_network(name="alice-net")
    template = TEMPLATE + ("  extra:\n    type: OS::Neutron::Port\n"
                           "    properties: {network: alice-net}\n")
    with keystone_api(rt, place) as c:
        r = c.post(f"/v1/{blue}/stacks", headers={"X-Auth-Token": alice_token},
                   json={"stack_name": "mine", "template": template})
        assert r.status_code == 201, r.text
        stack_id = r.json()["stack"]["id"]
        # The caller's token is gone before the engine is done: the trust carries on.
        place.alice.identity.delete("/auth/tokens", headers={"X-Subject-Token": alice_token})
        assert running.wait_for_stack(rt, blue, stack_id).stack_status == "CREATE_COMPLETE"
        (trust,) = place.trusts()
        assert trust["project_id"] == blue and trust["impersonation"] is True
        assert trust["trustor_user_id"] == place.alice.current_user_id
        assert trust["trustee_user_id"] == place.engine.current_user_id
        assert place.projects_of("server") == [blue] and place.projects_of("network") == [blue]
        assert len(list(place.alice.compute.servers())) == 1

        place.alice.close()
        place.alice = place.connect("blue")  # a new token of alice's
        headers = {"X-Auth-Token": place.alice.auth_token}
        for path in ("", "/resources", "/events", "/resources/server"):
            got = c.get(f"/v1/{blue}/stacks/mine/{stack_id}{path}", headers=headers)
            assert got.status_code == 200, got.text
            answers.append(got.text)
        assert c.delete(f"/v1/{blue}/stacks/mine/{stack_id}",
                        headers=headers).status_code == 204
        assert running.wait_for_stack(rt, blue, stack_id).stack_status == "DELETE_COMPLETE"
    assert place.projects_of("server") == [] and place.projects_of("network") == []
    assert place.trusts() == []  # deleted with the stack

    # No credential anywhere: logs, API answers, events, stored rows.
    events = json.dumps([e.__dict__ if hasattr(e, "__dict__") else repr(e)
                         for e in queries.list_events(rt, blue, stack_id)], default=str)
    with rt.store.read() as tx:
        stored = repr(tx.stack(stack_id)) + repr(tx.template(tx.stack(stack_id).template_id))
    for secret in (ENGINE_PASSWORD, ALICE_PASSWORD, alice_token, place.engine.auth_token):
        assert secret not in caplog.text
        assert not any(secret in a for a in answers)
        assert secret not in events and secret not in stored
    rt.store.engine.dispose()


def test_an_admin_for_another_project_or_a_refused_trust(tmp_path: Path, place: Place) -> None:
    rt = runtime(tmp_path, place, auth="keystone")
    blue = place.project("blue")
    with keystone_api(rt, place) as c:
        # Alice may not put her stack in a cloud the operator did not open to callers.
        r = c.post(f"/v1/{blue}/stacks", headers={"X-Auth-Token": place.alice.auth_token},
                   json={"stack_name": "s", "template": TEMPLATE, "cloud": "engine"})
        assert r.status_code == 403 and "cloud 'engine'" in r.json()["error"]["message"]
        # Keystone refuses the trust (a role alice lost since her token was issued): 403,
        # nothing stored.
        with place.state.locked():
            reader = place.state.find("roles", name="reader")["id"]
            place.state.tables["assignments"] = [
                a for a in place.state.tables["assignments"] if a["role_id"] != reader]
        r = c.post(f"/v1/{blue}/stacks", headers={"X-Auth-Token": place.alice.auth_token},
                   json={"stack_name": "s", "template": TEMPLATE})
        assert r.status_code == 403, r.text
        assert "refused the engine's trust" in r.json()["error"]["message"]
        assert queries.list_stacks(rt, blue) == [] and place.trusts() == []
    rt.store.engine.dispose()


def test_an_abandoned_stack_keeps_its_resources_but_not_the_trust(
        tmp_path: Path, place: Place) -> None:
    rt = runtime(tmp_path, place, auth="keystone")
    blue = place.project("blue")
    with keystone_api(rt, place) as c:
        r = c.post(f"/v1/{blue}/stacks", headers={"X-Auth-Token": place.alice.auth_token},
                   json={"stack_name": "kept", "template": TEMPLATE})
        assert r.status_code == 201, r.text
        stack_id = r.json()["stack"]["id"]
        assert running.wait_for_stack(rt, blue, stack_id).stack_status == "CREATE_COMPLETE"
        assert len(place.trusts()) == 1
        stacks.abandon_stack(rt, blue, stack_id)
    assert place.trusts() == []
    assert place.projects_of("server") == [blue]  # the caller's now, left alone
    rt.store.engine.dispose()


def test_a_named_cloud_beside_the_embedded_default(tmp_path: Path, place: Place) -> None:
    # No OS_CLOUD (and no simulated cloud of its own: only the command line starts one): a
    # stack naming an entry of the clouds.yaml that OS_CLIENT_CONFIG_FILE names lives there.
    rt = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"),
                      clock=ManualClock(time.time()),
                      environ={"OS_CLIENT_CONFIG_FILE": str(place.clouds_file)})
    stack = stacks.create_stack(rt, "t", "blue", TEMPLATE, scope=CloudScope(cloud="blue"))
    assert running.wait_for_stack(rt, "t", stack.id).stack_status == "CREATE_COMPLETE"
    assert place.projects_of("server") == [place.project("blue")]
    stacks.delete_stack(rt, "t", "blue")
    assert running.wait_for_stack(rt, "t", stack.id).stack_status == "DELETE_COMPLETE"
    assert place.projects_of("server") == []
    rt.store.engine.dispose()


def test_a_keystone_callers_template_validates_against_the_callers_project(
        tmp_path: Path, place: Place) -> None:
    rt = runtime(tmp_path, place, auth="keystone")
    blue = place.project("blue")
    place.alice.network.create_network(name="alice-only")
    port = ("heat_template_version: 2018-08-31\nresources:\n  p:\n"
            "    type: OS::Neutron::Port\n    properties: {network: NET}\n")
    with keystone_api(rt, place) as c:
        headers = {"X-Auth-Token": place.alice.auth_token}
        ok = c.post(f"/v1/{blue}/validate", headers=headers,
                    json={"template": port.replace("NET", "alice-only")})
        assert ok.status_code == 200, ok.text
        bad = c.post(f"/v1/{blue}/validate", headers=headers,
                     json={"template": port.replace("NET", "nobodys")})
        assert bad.status_code == 400
        assert "resources.p.properties.network: network 'nobodys' not found in the cloud" \
            in bad.json()["error"]["message"]
    assert place.trusts() == []  # a look makes no trust
    # The engine's own project does not have alice's network: what a look without the
    # caller's token would have said.
    assert place.engine.network.find_network("alice-only") is None
    rt.store.engine.dispose()


def test_a_trust_keystone_could_not_delete_then_is_deleted_by_the_sweeper(
        tmp_path: Path, place: Place) -> None:
    from convergence.engine.sweeper import Sweeper
    from convergence_simcloud.client import SimControl

    rt = runtime(tmp_path, place, auth="keystone")
    blue = place.project("blue")
    with keystone_api(rt, place) as c:
        headers = {"X-Auth-Token": place.alice.auth_token}
        r = c.post(f"/v1/{blue}/stacks", headers=headers,
                   json={"stack_name": "brief", "template": TEMPLATE})
        stack_id = r.json()["stack"]["id"]
        assert running.wait_for_stack(rt, blue, stack_id).stack_status == "CREATE_COMPLETE"
        # Keystone is down when the stack ends: its trust stays, and the stack says so.
        SimControl(place.url).add_rule("unavailable", service="identity", method="DELETE",
                                       count=1)
        assert c.delete(f"/v1/{blue}/stacks/brief/{stack_id}", headers=headers).status_code \
            == 204
        assert running.wait_for_stack(rt, blue, stack_id).stack_status == "DELETE_COMPLETE"
    assert len(place.trusts()) == 1
    with rt.store.read() as tx:
        assert tx.stack(stack_id).trust_id == place.trusts()[0]["id"]
    report = Sweeper(rt.engine, period=5.0).sweep(force=True)
    assert report.counts["trusts deleted"] == 1
    assert place.trusts() == []
    with rt.store.read() as tx:
        assert tx.stack(stack_id).trust_id is None
    rt.store.engine.dispose()
