"""Roles and policy: Heat's rules over the API, for readers, members, admins and the rest.

In token mode (a tokens file) a project has a reader, a member and an admin, and another
project a member. The reader lists and shows but is refused (403, Heat's ``Forbidden`` naming
the rule) every write, and the stack it tried to change is read back unchanged; the member
does all the project's writes; the engine's service list is the admin's. A policy file
overrides a rule; roles imply roles (admin, member, reader) and a token with none may do
nothing. The same answers come over real HTTP from ``convergence api`` and from Keystone
(the simulated cloud's) in keystone mode; noauth is a member, not an admin.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.services import running
from convergence.settings import Settings
from tests.api.test_stacks_api import assert_heat_error

READER, MEMBER, ADMIN = "token-of-a-reader", "token-of-a-member", "token-of-an-admin"
OTHER, NOBODY = "token-of-another-projects-member", "token-with-no-role"
TOKENS = {
    READER: {"project": "tenantA", "roles": ["reader"]},
    MEMBER: {"project": "tenantA", "roles": ["member"]},
    ADMIN: {"project": "tenantA", "roles": ["admin"]},
    OTHER: {"project": "tenantB", "roles": ["member"]},
    NOBODY: {"project": "tenantA", "roles": []},
}
BASE = "/v1/tenantA"
TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "parameters": {"value": {"type": "string", "default": "one"}},
    "resources": {
        "first": {"type": "OS::Heat::TestResource",
                  "properties": {"value": {"get_param": "value"}}},
        "handle": {"type": "OS::Heat::WaitConditionHandle"},
    },
    "outputs": {"copied": {"value": {"get_attr": ["first", "output"]}}},
}
# Heat's own default for signals (a reader, or a stack's user, may signal).
HEAT_SIGNAL_RULE = ("(role:reader and project_id:%(project_id)s) or "
                    "(role:heat_stack_user and project_id:%(project_id)s)")
ADMIN_ONLY = "role:admin and project_id:%(project_id)s"


def hdr(token: str) -> dict[str, str]:
    return {"X-Auth-Token": token}


def write_json(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def token_runtime(tmp_path: Path, **settings: Any) -> Runtime:
    return open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'policy.db'}",
                                 auth="token",
                                 tokens_file=write_json(tmp_path / "tokens.json", TOKENS),
                                 **settings))


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    return token_runtime(tmp_path)


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def made(client: Any, rt: Runtime | None, token: str = MEMBER, name: str = "web",
         template: Any = TEMPLATE) -> str:
    """A stack the member created (and, given the runtime, saw complete): its URL."""
    r = client.post(f"{BASE}/stacks", headers=hdr(token),
                    json={"stack_name": name, "template": template})
    assert r.status_code == 201, r.text
    sid = r.json()["stack"]["id"]
    if rt is not None:
        running.wait_for_stack(rt, "tenantA", sid, timeout=60)
    return f"{BASE}/stacks/{name}/{sid}"


def refused(r: Any, rule: str) -> None:
    body = assert_heat_error(r, 403, "Forbidden")
    assert body["error"]["message"] == f"You are not authorized to use {rule}."


def as_it_is(client: Any, url: str) -> dict[str, Any]:
    """What can be read of a stack (by its member): what a refused write must leave alone."""
    stack = client.get(url, headers=hdr(MEMBER)).json()["stack"]
    resources = client.get(f"{url}/resources", headers=hdr(MEMBER)).json()["resources"]
    events = client.get(f"{url}/events", headers=hdr(MEMBER)).json()["events"]
    return {"status": stack["stack_status"], "generation": stack["generation"],
            "parameters": stack["parameters"]["value"],
            "resources": sorted((r["resource_name"], r["resource_status"]) for r in resources),
            "events": len(events),
            "signals": [e["resource_status_reason"] for e in events
                        if e["resource_status"] == "SIGNAL_COMPLETE"]}


# What a reader may not do to a stack at ``url``: (method, sub-path, body, rule).
WRITES: list[tuple[str, str, Any, str]] = [
    ("PUT", "", {"template": TEMPLATE, "parameters": {"value": "two"}}, "stacks:update"),
    ("PATCH", "", {"parameters": {"value": "three"}}, "stacks:update_patch"),
    ("DELETE", "", None, "stacks:delete"),
    ("DELETE", "/abandon", None, "stacks:abandon"),
    ("GET", "/export", None, "stacks:export"),
    ("POST", "/actions", {"check": None}, "actions:check"),
    ("POST", "/actions", {"cancel_update": None}, "actions:cancel_update"),
    ("POST", "/actions", {"cancel_without_rollback": None}, "actions:cancel_without_rollback"),
    ("POST", "/resources/handle/signal", {"status": "SUCCESS", "id": "1", "data": "x"},
     "resource:signal"),
    ("PATCH", "/resources/first", {"mark_unhealthy": True, "resource_status_reason": "x"},
     "resource:mark_unhealthy"),
    ("PUT", "/preview", {"template": TEMPLATE}, "stacks:preview_update"),
]


def test_a_reader_reads_and_changes_nothing(client: TestClient, rt: Runtime) -> None:
    url = made(client, rt)
    before = as_it_is(client, url)
    for sub in ("", "/resources", "/resources/first", "/events", "/outputs",
                "/outputs/copied", "/template", "/environment", "/files", "/progress"):
        assert client.get(url + sub, headers=hdr(READER)).status_code == 200, sub
    listed = client.get(f"{BASE}/stacks", headers=hdr(READER)).json()["stacks"]
    assert [s["stack_name"] for s in listed] == ["web"]
    for method, sub, body, rule in WRITES:
        refused(client.request(method, url + sub, json=body, headers=hdr(READER)), rule)
    refused(client.post(f"{BASE}/stacks", headers=hdr(READER),
                        json={"stack_name": "mine", "template": TEMPLATE}), "stacks:create")
    refused(client.post(f"{BASE}/validate", headers=hdr(READER), json={"template": TEMPLATE}),
            "stacks:validate_template")
    refused(client.post(f"{BASE}/software_configs", headers=hdr(READER),
                        json={"name": "c", "config": "#!/bin/sh"}), "software_configs:create")
    refused(client.post(f"{BASE}/subscriptions", headers=hdr(READER),
                        json={"url": "https://hooks.example.com/x"}), "subscriptions:create")
    # Another project's member does not reach this project at all.
    assert_heat_error(client.delete(url, headers=hdr(OTHER)), 403, "Forbidden")
    running.wait_for_stack(rt, "tenantA", url.rsplit("/", 1)[1], timeout=60)
    assert as_it_is(client, url) == before
    assert [s["stack_name"] for s in client.get(f"{BASE}/stacks", headers=hdr(MEMBER))
            .json()["stacks"]] == ["web"]
    assert client.get(f"{BASE}/software_configs", headers=hdr(READER)).json() == {
        "software_configs": []}


def test_a_member_does_the_projects_writes_not_the_admins(client: TestClient,
                                                          rt: Runtime) -> None:
    url = made(client, rt)
    sid = url.rsplit("/", 1)[1]
    r = client.patch(url, json={"parameters": {"value": "two"}}, headers=hdr(MEMBER))
    assert r.status_code == 202, r.text
    running.wait_for_stack(rt, "tenantA", sid, timeout=60)
    r = client.post(f"{url}/resources/handle/signal", headers=hdr(MEMBER),
                    json={"status": "SUCCESS", "id": "1", "data": "ready"})
    assert r.status_code == 200, r.text
    r = client.patch(f"{url}/resources/first", headers=hdr(MEMBER),
                     json={"mark_unhealthy": True, "resource_status_reason": "broken"})
    assert r.status_code == 200, r.text
    assert client.get(f"{url}/export", headers=hdr(MEMBER)).status_code == 200
    assert client.post(f"{BASE}/validate", headers=hdr(MEMBER),
                       json={"template": TEMPLATE}).status_code == 200
    after = as_it_is(client, url)
    assert after["parameters"] == "two" and after["generation"] == 2
    assert ("first", "CHECK_FAILED") in after["resources"]
    assert after["signals"] == ["Signal: status:SUCCESS reason:Signal 1 received"]
    config = client.post(f"{BASE}/software_configs", headers=hdr(MEMBER),
                         json={"name": "c", "config": "#!/bin/sh"})
    assert config.status_code == 200, config.text
    config_id = config.json()["software_config"]["id"]
    r = client.delete(f"{BASE}/software_configs/{config_id}", headers=hdr(MEMBER))
    assert r.status_code == 204
    assert client.delete(url, headers=hdr(MEMBER)).status_code == 204
    assert running.wait_for_stack(rt, "tenantA", sid, timeout=60).stack_status \
        == "DELETE_COMPLETE"
    assert client.get(f"{BASE}/stacks", headers=hdr(MEMBER)).json() == {"stacks": []}
    # The project's, not the engine's: its processes are the admin's to see.
    refused(client.get(f"{BASE}/services", headers=hdr(MEMBER)), "service:index")


def test_the_service_list_is_the_admins(client: TestClient) -> None:
    for token in (READER, MEMBER, OTHER, NOBODY):
        r = client.get(f"{BASE}/services", headers=hdr(token))
        assert r.status_code == 403, (token, r.text)
    refused(client.get(f"{BASE}/services", headers=hdr(MEMBER)), "service:index")
    assert client.get(f"{BASE}/services", headers=hdr(ADMIN)).json() == {"services": []}


def test_roles_imply_roles_and_no_role_does_nothing(client: TestClient, rt: Runtime) -> None:
    # admin implies member implies reader, whatever the tokens file lists.
    url = made(client, rt, token=ADMIN)
    assert client.get(f"{BASE}/stacks", headers=hdr(MEMBER)).status_code == 200
    refused(client.get(f"{BASE}/stacks", headers=hdr(NOBODY)), "stacks:index")
    refused(client.get(url, headers=hdr(NOBODY)), "stacks:show")
    refused(client.post(f"{BASE}/stacks", headers=hdr(NOBODY),
                        json={"stack_name": "x", "template": TEMPLATE}), "stacks:create")
    refused(client.get(f"{BASE}/stacks/web", headers=hdr(NOBODY), follow_redirects=False),
            "stacks:lookup")
    assert client.delete(url, headers=hdr(ADMIN)).status_code == 204


def test_a_policy_file_overrides_rules(tmp_path: Path) -> None:
    policy = write_json(tmp_path / "policy.json",
                        {"stacks:delete": ADMIN_ONLY, "resource:signal": HEAT_SIGNAL_RULE})
    rt = token_runtime(tmp_path, policy_file=policy)
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        url = made(client, rt)
        refused(client.delete(url, headers=hdr(MEMBER)), "stacks:delete")
        assert client.get(url, headers=hdr(MEMBER)).json()["stack"]["stack_status"] \
            == "CREATE_COMPLETE"
        # Heat's own default for signals, restored: the reader may signal.
        r = client.post(f"{url}/resources/handle/signal", headers=hdr(READER),
                        json={"status": "SUCCESS", "id": "1", "data": "ok"})
        assert r.status_code == 200, r.text
        assert client.delete(url, headers=hdr(ADMIN)).status_code == 204


def test_noauth_is_a_member_not_an_admin(tmp_path: Path) -> None:
    rt = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'noauth.db'}"))
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        url = made(client, rt)
        assert client.delete(url).status_code == 204
        refused(client.get(f"{BASE}/services"), "service:index")


def test_resource_types_of_the_admins(client: TestClient) -> None:
    flavor = {"heat_template_version": "2018-08-31", "resources": {"f": {
        "type": "OS::Nova::Flavor", "properties": {"ram": 512, "vcpus": 1}}}}
    r = client.post(f"{BASE}/stacks", headers=hdr(MEMBER),
                    json={"stack_name": "f", "template": flavor})
    refused(r, "resource_types:OS::Nova::Flavor")
    # The same type in a nested template of the files map.
    nested = {"heat_template_version": "2018-08-31",
              "resources": {"n": {"type": "nested.yaml"}}}
    r = client.post(f"{BASE}/stacks", headers=hdr(MEMBER),
                    json={"stack_name": "n", "template": nested,
                          "files": {"nested.yaml": json.dumps(flavor)}})
    refused(r, "resource_types:OS::Nova::Flavor")
    assert client.get(f"{BASE}/stacks", headers=hdr(MEMBER)).json() == {"stacks": []}
    listed = client.get(f"{BASE}/resource_types", headers=hdr(MEMBER)).json()
    assert "OS::Nova::Server" in listed["resource_types"]
    assert "OS::Nova::Flavor" not in listed["resource_types"]
    refused(client.get(f"{BASE}/resource_types/OS::Nova::Flavor", headers=hdr(MEMBER)),
            "resource_types:OS::Nova::Flavor")
    admin = client.get(f"{BASE}/resource_types", headers=hdr(ADMIN)).json()
    assert "OS::Nova::Flavor" in admin["resource_types"]


def test_every_route_names_its_heat_rule(client: TestClient) -> None:
    """Every route under ``/v1/{tenant_id}/`` is guarded by the rule the policy table names
    for it; the actions route, whose rule is its action's, checks it itself."""
    from fastapi.routing import APIRoute

    from convergence.api import policies, policy

    table: dict[tuple[str, str], set[str]] = {}
    for method, path, name in policies.operations():
        table.setdefault((method, "/v1/{tenant_id}" + path), set()).add(name)

    def walk(items: list[Any]) -> Iterator[Any]:
        for item in items:
            inner = getattr(item, "original_router", None)
            yield from walk(list(inner.routes)) if inner is not None else [item]

    used: set[str] = set()
    for route in walk(list(client.app.routes)):  # type: ignore[attr-defined]
        if not isinstance(route, APIRoute) or not route.path.startswith("/v1/{tenant_id}/") \
                or route.path == "/v1/{tenant_id}/":
            continue
        declared = {policy.RULE_OF[d.call] for d in route.dependant.dependencies
                    if d.call in policy.RULE_OF}
        for method in route.methods:
            expected = table.get((method, route.path)) or table.get(("*", route.path))
            assert expected, f"no rule for {method} {route.path}"
            if len(expected) > 1:  # the actions route
                assert not declared, route.path
            else:
                assert declared == expected, (method, route.path)
            used |= expected
    assert used == {r.name for r in policies.RULES}


def test_over_http_with_a_policy_file(tmp_path: Path) -> None:
    from tests.api_process import api_process

    env: dict[str, str | None] = {
        "CONVERGENCE_AUTH": "token",
        "CONVERGENCE_TOKENS_FILE": write_json(tmp_path / "tokens.json", TOKENS),
        "CONVERGENCE_POLICY_FILE": write_json(tmp_path / "policy.json",
                                              {"stacks:delete": ADMIN_ONLY})}
    with api_process(tmp_path, env_updates=env) as (_, url, _log), \
            httpx.Client(base_url=url, timeout=30) as http:
        refused(http.post(f"{BASE}/stacks", headers=hdr(READER),
                          json={"stack_name": "web", "template": TEMPLATE}), "stacks:create")
        stack = made(http, None)
        for _ in range(600):
            shown = http.get(stack, headers=hdr(READER)).json()["stack"]
            if shown["stack_status"] != "CREATE_IN_PROGRESS":
                break
            time.sleep(0.05)
        assert shown["stack_status"] == "CREATE_COMPLETE"
        refused(http.delete(stack, headers=hdr(READER)), "stacks:delete")
        refused(http.delete(stack, headers=hdr(MEMBER)), "stacks:delete")  # the policy file's
        refused(http.get(f"{BASE}/services", headers=hdr(MEMBER)), "service:index")
        services = http.get(f"{BASE}/services", headers=hdr(ADMIN)).json()["services"]
        assert [s["binary"] for s in services] == ["convergence-api"]
        assert http.delete(stack, headers=hdr(ADMIN)).status_code == 204


def test_keystone_users_get_the_same_answers(tmp_path: Path) -> None:
    """Keystone (the simulated cloud's) says who is who: a reader, a member and an admin of
    one project are answered as the tokens file's are."""
    from convergence.api.auth import KeystoneTokens
    from convergence.ports.clock import ManualClock
    from convergence_simcloud.seed import Seed, SeedUser
    from convergence_simcloud.serve import running as serving
    from convergence_simcloud.state import SimCloud
    from tests.openstack.test_clouds import ALICE_PASSWORD, ENGINE_PASSWORD, clouds_yaml

    seed = Seed(projects=["admin", "service", "blue"], users=[
        SeedUser("admin", "admin", {"admin": ["admin", "member", "reader"]}),
        # the engine's user: the service role lets it validate its callers' tokens
        SeedUser("convergence", ENGINE_PASSWORD, {"service": ["member", "service"]}),
        SeedUser("alice", ALICE_PASSWORD, {"blue": ["member"]}),
        SeedUser("rita", "rita-pass", {"blue": ["reader"]}),
        SeedUser("adam", "adam-pass", {"blue": ["admin"]})])
    with serving(SimCloud(seed=seed)) as cloud:
        (tmp_path / "clouds.yaml").write_text(clouds_yaml(cloud))

        def token(user: str, password: str) -> tuple[str, str]:
            r = httpx.post(f"{cloud}/v3/auth/tokens", json={"auth": {"identity": {
                "methods": ["password"], "password": {"user": {
                    "name": user, "password": password, "domain": {"name": "Default"}}}}}})
            assert r.status_code == 201, r.text
            return r.headers["X-Subject-Token"], r.json()["token"]["project"]["id"]

        rita, blue = token("rita", "rita-pass")
        alice, adam = token("alice", ALICE_PASSWORD)[0], token("adam", "adam-pass")[0]
        rt = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'k.db'}",
                                   auth="keystone"), clock=ManualClock(time.time()),
                          environ={"OS_CLOUD": "engine",
                                   "OS_CLIENT_CONFIG_FILE": str(tmp_path / "clouds.yaml")})
        service = KeystoneTokens(cloud + "/v3", token("convergence", ENGINE_PASSWORD)[0])
        base = f"/v1/{blue}"
        with TestClient(create_app(rt, drive_dispatcher=False,
                                   authenticator=service)) as client:
            body = {"stack_name": "web", "template": TEMPLATE}
            refused(client.post(f"{base}/stacks", headers=hdr(rita), json=body),
                    "stacks:create")
            r = client.post(f"{base}/stacks", headers=hdr(alice), json=body)
            assert r.status_code == 201, r.text
            sid = r.json()["stack"]["id"]
            running.wait_for_stack(rt, blue, sid, timeout=60)
            url = f"{base}/stacks/web/{sid}"
            assert client.get(url, headers=hdr(rita)).json()["stack"]["stack_status"] \
                == "CREATE_COMPLETE"
            refused(client.delete(url, headers=hdr(rita)), "stacks:delete")
            refused(client.post(f"{url}/actions", headers=hdr(rita),
                                json={"cancel_update": None}), "actions:cancel_update")
            refused(client.get(f"{base}/services", headers=hdr(alice)), "service:index")
            assert client.get(f"{base}/services", headers=hdr(adam)).status_code == 200
            assert client.get(url, headers=hdr(rita)).json()["stack"]["generation"] == 1
            assert client.delete(url, headers=hdr(alice)).status_code == 204
            assert running.wait_for_stack(rt, blue, sid, timeout=60).stack_status \
                == "DELETE_COMPLETE"
        rt.store.engine.dispose()
