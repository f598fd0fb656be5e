"""Wait conditions and signed URLs between tenants and across replacements, through the API in
token mode (two tenants), on SQLite and on PostgreSQL.

- A wait condition's handle is resolved within its own stack: tenant B naming tenant A's handle
  (its id, through a parameter) fails naming the property and B never sees A's data; a
  ``get_resource`` of something that is no handle is refused when the template is accepted.
- A signed URL is bound to the version of the resource it was made for: once an
  ``UpdateWaitConditionHandle`` or a scaling policy is replaced, its old URL answers 404 and
  changes nothing, and the new URL works. A URL made before URLs named their version works
  while its resource was never replaced.
- With ``signed_url_seconds`` set, a URL past its time answers 404 and changes nothing.

The engine runs in this process on a manual clock (``drive_dispatcher=False``: the test runs
the work, up to the moment it wants to look).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.ports.clock import ManualClock
from convergence.ports.views import PARKED
from convergence.runtime import Runtime, open_runtime
from convergence.services import running, signals
from convergence.settings import Settings, load_settings
from tests.conftest_services import (
    TEST_ENCRYPTION_KEYS,
    drop_postgres_database,
    fresh_database_url,
    postgres_url,
)

A, B = "tenantA", "tenantB"
TOKENS = {"token-of-a": {"project": A, "roles": ["member"]},
          "token-of-b": {"project": B, "roles": ["member"]}}
AUTH = {A: {"X-Auth-Token": "token-of-a"}, B: {"X-Auth-Token": "token-of-b"}}
SECRET = "db_password=correct-horse-battery-staple"

HANDLE_AND_WAIT = """
heat_template_version: 2018-08-31
resources:
  handle: {type: OS::Heat::%s}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: %d, timeout: 43200}
outputs:
  data: {value: {get_attr: [wait, data]}}
"""

SOMEONE_ELSES_HANDLE = """
heat_template_version: 2018-08-31
parameters:
  handle: {type: string}
resources:
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_param: handle}, timeout: 600}
outputs:
  data: {value: {get_attr: [wait, data]}}
"""


def scaling(group: str) -> str:
    member = {"type": "OS::Heat::None"}
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {
            "asg": {"type": "OS::Heat::AutoScalingGroup",
                    "properties": {"min_size": 1, "max_size": 4, "resource": member}},
            "other": {"type": "OS::Heat::AutoScalingGroup",
                      "properties": {"min_size": 1, "max_size": 4, "resource": member}},
            # auto_scaling_group_id cannot change in place: a new group replaces the policy
            "up": {"type": "OS::Heat::ScalingPolicy", "properties": {
                "auto_scaling_group_id": {"get_resource": group},
                "adjustment_type": "change_in_capacity", "scaling_adjustment": 1}}},
        "outputs": {"asg": {"value": {"get_attr": ["asg", "current_size"]}},
                    "other": {"value": {"get_attr": ["other", "current_size"]}}}})


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    name = f"convergence_test_signed_urls_{os.getpid()}"
    url = postgres_url(name)
    yield url
    drop_postgres_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def make_client(request: pytest.FixtureRequest,
                tmp_path: Path) -> Iterator[Callable[..., tuple[Runtime, TestClient]]]:
    """Opens the API (token mode) over a fresh database, with the settings given."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")
    opened: list[tuple[Runtime, TestClient]] = []

    def make(**settings: Any) -> tuple[Runtime, TestClient]:
        rt = open_runtime(Settings(database_url=fresh_database_url(request, tmp_path),
                                   auth="token", tokens_file=str(tokens),
                                   encryption_keys=TEST_ENCRYPTION_KEYS, **settings),
                          clock=ManualClock())
        client = TestClient(create_app(rt, drive_dispatcher=False))
        client.__enter__()
        opened.append((rt, client))
        return rt, client

    yield make
    for rt, client in opened:
        client.__exit__(None, None, None)
        assert rt.inprocess is not None and rt.inprocess.errors == []
        rt.store.engine.dispose()


@pytest.fixture
def api(make_client: Callable[..., tuple[Runtime, TestClient]]) -> tuple[Runtime, TestClient]:
    return make_client()


# The story's steps -------------------------------------------------------------------------

def create(client: TestClient, tenant: str, name: str, template: str,
           **extra: Any) -> str:
    made = client.post(f"/v1/{tenant}/stacks", headers=AUTH[tenant], json={
        "stack_name": name, "template": template, **extra})
    assert made.status_code == 201, made.text
    return str(made.json()["stack"]["id"])


def waiting(rt: Runtime, stack_id: str) -> bool:
    """Whether the stack's request is parked on a wait condition (or over)."""
    with rt.store.read() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.traversal_id is not None
        return stack.status != "IN_PROGRESS" or \
            tx.node_states(stack.traversal_id).get(PARKED, 0) > 0


def run_until_waiting(rt: Runtime, stack_id: str) -> None:
    assert rt.inprocess is not None
    assert rt.inprocess.run(until=lambda: waiting(rt, stack_id))


def finish(rt: Runtime, client: TestClient, tenant: str, stack_id: str) -> dict[str, Any]:
    running.wait_for_stack(rt, tenant, stack_id, timeout=600)
    return stack(client, tenant, stack_id)


def stack(client: TestClient, tenant: str, stack_id: str) -> dict[str, Any]:
    found = client.get(f"/v1/{tenant}/stacks/{stack_id}", headers=AUTH[tenant])
    assert found.status_code == 200, found.text
    return dict(found.json()["stack"])


def resource(client: TestClient, tenant: str, stack_id: str, name: str) -> dict[str, Any]:
    found = client.get(f"/v1/{tenant}/stacks/{stack_id}/resources/{name}",
                       headers=AUTH[tenant])
    assert found.status_code == 200, found.text
    return dict(found.json()["resource"])


def signed_path(url: str) -> str:
    """A signed URL's path (the engine names its public address; the test client is it)."""
    return "/v1/signed/" + url.split("/v1/signed/", 1)[1]


def endpoint(client: TestClient, tenant: str, stack_id: str) -> str:
    return signed_path(resource(client, tenant, stack_id, "handle")["attributes"]["endpoint"])


def everything_b_sees(client: TestClient, stack_id: str) -> str:
    """All tenant B's answers about its stack: the stack, its outputs, resources, events."""
    base = f"/v1/{B}/stacks/{stack_id}"
    answers = [client.get(path, headers=AUTH[B]).text for path in (
        base, f"{base}/outputs", f"{base}/resources", f"{base}/resources/wait",
        f"{base}/events")]
    return "\n".join(answers)


def signal_events(client: TestClient, tenant: str, stack_id: str) -> list[dict[str, Any]]:
    events = client.get(f"/v1/{tenant}/stacks/{stack_id}/events", headers=AUTH[tenant],
                        params={"limit": 500}).json()["events"]
    return [e for e in events if e["resource_status"].startswith("SIGNAL_")]


# Tests ---------------------------------------------------------------------------------------

def test_another_tenants_handle_fails_the_wait_condition_and_tells_nothing(
        api: tuple[Runtime, TestClient]) -> None:
    rt, client = api
    theirs = create(client, A, "a", HANDLE_AND_WAIT % ("WaitConditionHandle", 1))
    run_until_waiting(rt, theirs)
    handle_id = resource(client, A, theirs, "handle")["physical_resource_id"]
    said = client.post(endpoint(client, A, theirs), json={"data": SECRET})
    assert said.status_code == 200, said.text
    assert finish(rt, client, A, theirs)["stack_status"] == "CREATE_COMPLETE"

    mine = create(client, B, "b", SOMEONE_ELSES_HANDLE, parameters={"handle": handle_id},
                  disable_rollback=True)
    done = finish(rt, client, B, mine)
    assert done["stack_status"] == "CREATE_FAILED", done["stack_status_reason"]
    wait = resource(client, B, mine, "wait")
    assert wait["resource_status"] == "CREATE_FAILED"
    assert "Property handle" in wait["resource_status_reason"]
    assert "is not a wait condition handle of this stack" in wait["resource_status_reason"]
    assert "correct-horse" not in everything_b_sees(client, mine)
    # A's stack is as it was: its handle kept its one signal
    assert json.loads(stack(client, A, theirs)["outputs"][0]["output_value"]) == {"1": SECRET}


def test_a_handle_named_by_get_resource_must_be_a_handle(
        api: tuple[Runtime, TestClient]) -> None:
    _, client = api
    template = (HANDLE_AND_WAIT % ("WaitConditionHandle", 1)).replace(
        "handle: {type: OS::Heat::WaitConditionHandle}", "handle: {type: OS::Heat::None}")
    refused = client.post(f"/v1/{B}/stacks", headers=AUTH[B],
                          json={"stack_name": "b", "template": template})
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert "resources.wait.properties.handle" in message and "OS::Heat::None" in message
    assert client.get(f"/v1/{B}/stacks", headers=AUTH[B]).json()["stacks"] == []


def test_a_replaced_handles_old_url_is_404_and_the_new_one_completes_the_new_wait(
        api: tuple[Runtime, TestClient]) -> None:
    rt, client = api
    template = HANDLE_AND_WAIT % ("UpdateWaitConditionHandle", 1)
    sid = create(client, A, "a", template)
    run_until_waiting(rt, sid)
    old = endpoint(client, A, sid)
    # a URL made before URLs named their resource's version: good while there is only one
    claims = signals.verify(signals.signing_key(rt), old.rsplit("/", 1)[1])
    assert claims is not None
    unbound = signals.sign(signals.signing_key(rt), {k: v for k, v in claims.items()
                                                     if k != "i"})
    assert client.post(f"/v1/signed/{unbound}", json={"data": "first"}).status_code == 200
    assert finish(rt, client, A, sid)["stack_status"] == "CREATE_COMPLETE"

    updated = client.put(f"/v1/{A}/stacks/a/{sid}", headers=AUTH[A],
                         json={"template": template})
    assert updated.status_code == 202, updated.text
    run_until_waiting(rt, sid)
    new = endpoint(client, A, sid)
    assert new != old
    signalled = len(signal_events(client, A, sid))
    for url in (old, f"/v1/signed/{unbound}"):
        answer = client.post(url, json={"data": "stale"})
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["message"] == "The resource could not be found."
    run_until_waiting(rt, sid)
    assert stack(client, A, sid)["stack_status"] == "UPDATE_IN_PROGRESS"
    assert len(signal_events(client, A, sid)) == signalled  # nothing changed
    assert client.post(new, json={"data": "second"}).status_code == 200
    done = finish(rt, client, A, sid)
    assert done["stack_status"] == "UPDATE_COMPLETE", done["stack_status_reason"]
    assert json.loads(done["outputs"][0]["output_value"]) == {"1": "second"}


def test_a_replaced_scaling_policys_old_url_is_404(api: tuple[Runtime, TestClient]) -> None:
    rt, client = api
    sid = create(client, A, "s", scaling("asg"))
    assert finish(rt, client, A, sid)["stack_status"] == "CREATE_COMPLETE"
    old = signed_path(resource(client, A, sid, "up")["attributes"]["alarm_url"])
    updated = client.put(f"/v1/{A}/stacks/s/{sid}", headers=AUTH[A],
                         json={"template": scaling("other")})
    assert updated.status_code == 202, updated.text
    assert finish(rt, client, A, sid)["stack_status"] == "UPDATE_COMPLETE"
    new = signed_path(resource(client, A, sid, "up")["attributes"]["alarm_url"])
    assert new != old

    answer = client.post(old, json={})
    assert answer.status_code == 404, answer.text
    assert signal_events(client, A, sid) == []  # nothing changed
    assert {o["output_key"]: o["output_value"] for o in stack(client, A, sid)["outputs"]} == \
        {"asg": 1, "other": 1}
    scaled = client.post(new, json={})
    assert scaled.status_code == 200, scaled.text
    assert scaled.json()["result"] == "scaling other from 1 to 2 members"
    done = finish(rt, client, A, sid)
    assert {o["output_key"]: o["output_value"] for o in done["outputs"]} == \
        {"asg": 1, "other": 2}


def test_an_expired_url_is_404_and_changes_nothing(
        make_client: Callable[..., tuple[Runtime, TestClient]]) -> None:
    rt, client = make_client(signed_url_seconds=3600.0)
    sid = create(client, A, "a", HANDLE_AND_WAIT % ("WaitConditionHandle", 2))
    run_until_waiting(rt, sid)
    url = endpoint(client, A, sid)
    assert client.post(url, json={"data": "in time"}).status_code == 200
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    clock.advance(3601)
    late = client.post(url, json={"data": "too late"})
    assert late.status_code == 404, late.text
    run_until_waiting(rt, sid)
    assert stack(client, A, sid)["stack_status"] == "CREATE_IN_PROGRESS"
    assert [e["resource_status_reason"] for e in signal_events(client, A, sid)] == \
        ["Signal: status:SUCCESS reason:Signal 1 received"]


def test_the_expiry_setting() -> None:
    assert load_settings({}).signed_url_seconds is None
    assert load_settings({"CONVERGENCE_SIGNED_URL_SECONDS": "0"}).signed_url_seconds is None
    assert load_settings({"CONVERGENCE_SIGNED_URL_SECONDS": "900"}).signed_url_seconds == 900
