"""Cancelling a request in progress, If-Match and disable_rollback, through the API.

The runtime has a manual clock and the app does not drive the dispatcher: a test runs the work
itself, stops it while a resource's update is under way (``action_wait_secs: {update: 600}``)
and lets the clock jump ahead when it drains the rest. Assertions are on the API's answers,
the store's rows and the test entities the resources made; nothing asserts on timing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.ports.clock import ManualClock
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries
from convergence.settings import Settings
from tests.api.test_stacks_api import BASE, TEMPLATE, assert_heat_error, create, drain
from tests.engine.harness import entity_backend

TENANT = "tenantA"

# TEMPLATE with a first resource whose update (a changed value) takes ten minutes.
SLOW_UPDATE: dict[str, Any] = copy.deepcopy(TEMPLATE)
SLOW_UPDATE["resources"]["first"]["properties"]["action_wait_secs"] = {"update": 600}


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'actions.db'}",
                                    inline_seconds=0.0), clock=ManualClock())
    yield runtime
    assert runtime.inprocess is not None and runtime.inprocess.errors == []
    runtime.store.engine.dispose()


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def show(client: TestClient, url: str) -> dict[str, Any]:
    r = client.get(url)
    assert r.status_code == 200, r.text
    return dict(r.json()["stack"])


def records(rt: Runtime, sid: str) -> dict[str, Any]:
    """The current record of each resource, by name."""
    rows = queries.list_resources(rt, TENANT, sid)
    return {r.name: r for r in sorted(rows, key=lambda r: (r.replaced_by is None, r.id))}


def entity_values(rt: Runtime, sid: str) -> dict[str, str | None]:
    """What each resource's test entity holds (the simulated cloud)."""
    return {name: entity_backend(rt).get(r.physical_id) if r.physical_id else None
            for name, r in records(rt, sid).items()}


def update_in_progress(client: TestClient, rt: Runtime) -> tuple[str, str]:
    """A stack created with value "one", then an update to "two" under way on ``first``."""
    sid = create(client, parameters={"value": "one"})["id"]
    drain(rt, sid, TENANT)
    url = f"{BASE}/stacks/web/{sid}"
    r = client.put(url, json={"template": SLOW_UPDATE, "parameters": {"value": "two"}})
    assert r.status_code == 202, r.text
    assert rt.inprocess is not None

    def first_updating() -> bool:
        first = records(rt, sid)["first"]
        return (first.action, first.status) == ("UPDATE", "IN_PROGRESS")

    assert rt.inprocess.run(until=first_updating)
    shown = show(client, url)
    assert (shown["stack_status"], shown["generation"]) == ("UPDATE_IN_PROGRESS", 2)
    return sid, url


def action(client: TestClient, url: str, name: str, **kwargs: Any) -> Any:
    return client.post(f"{url}/actions", json={name: None}, **kwargs)


# Cancel -----------------------------------------------------------------------------------------

def test_cancel_update_rolls_back_to_the_original_values(client: TestClient,
                                                         rt: Runtime) -> None:
    sid, url = update_in_progress(client, rt)
    before = {name: r.physical_id for name, r in records(rt, sid).items()}

    r = action(client, url, "cancel_update")
    assert r.status_code == 200, r.text
    assert r.json() is None  # Heat's answer: 200, null
    shown = show(client, url)
    assert (shown["stack_status"], shown["generation"]) == ("ROLLBACK_IN_PROGRESS", 3)

    drain(rt, sid, TENANT)
    shown = show(client, url)
    assert shown["stack_status"] == "ROLLBACK_COMPLETE", shown["stack_status_reason"]
    assert shown["observed_generation"] == shown["generation"] == 3
    assert shown["outputs"][0]["output_value"] == "one"
    assert shown["parameters"]["value"] == "one"  # the stack's template is the original again
    # The same resources (updated back in place, not replaced), holding the original values.
    after = records(rt, sid)
    assert {name: r.physical_id for name, r in after.items()} == before
    assert {(r.action, r.status) for r in after.values()} <= {
        ("CREATE", "COMPLETE"), ("UPDATE", "COMPLETE"), ("ROLLBACK", "COMPLETE")}
    assert entity_values(rt, sid) == {"first": "one", "second": "one"}
    events = client.get(f"{url}/events?resource_name=web").json()["events"]
    assert [e["resource_status"] for e in events][-2:] == ["ROLLBACK_IN_PROGRESS",
                                                            "ROLLBACK_COMPLETE"]


def test_cancel_without_rollback_stops_the_update_where_it_is(client: TestClient,
                                                              rt: Runtime) -> None:
    sid, url = update_in_progress(client, rt)
    r = action(client, url, "cancel_without_rollback")
    assert r.status_code == 200, r.text
    assert r.json() is None
    shown = show(client, url)
    assert shown["stack_status"] == "UPDATE_FAILED"
    assert shown["stack_status_reason"] == "Stack UPDATE cancelled"
    assert shown["generation"] == shown["observed_generation"] == 3

    drain(rt, sid, TENANT)  # what was queued for the stopped update does nothing more
    shown = show(client, url)
    assert (shown["stack_status"], shown["generation"]) == ("UPDATE_FAILED", 3)
    first = records(rt, sid)["first"]
    assert first.status != "IN_PROGRESS" and first.operation is None
    # Nothing was rolled back: the second resource still holds the original value, which the
    # stopped update never got to.
    assert entity_values(rt, sid)["second"] == "one"


def test_cancel_update_rolls_a_create_back_to_nothing(client: TestClient,
                                                     rt: Runtime) -> None:
    sid = create(client)["id"]
    url = f"{BASE}/stacks/web/{sid}"
    r = action(client, url, "cancel_update")
    assert r.status_code == 200, r.text
    assert show(client, url)["stack_status"] == "ROLLBACK_IN_PROGRESS"
    drain(rt, sid, TENANT)
    assert show(client, url)["stack_status"] == "ROLLBACK_COMPLETE"
    assert queries.list_resources(rt, TENANT, sid) == []
    assert not [o for o, _ in entity_backend(rt).live().values() if o.startswith(sid + "/")]


def test_cancel_without_rollback_stops_a_create(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    url = f"{BASE}/stacks/web/{sid}"
    r = action(client, url, "cancel_without_rollback")
    assert r.status_code == 200, r.text
    shown = show(client, url)
    assert (shown["stack_status"], shown["stack_status_reason"]) == \
        ("CREATE_FAILED", "Stack CREATE cancelled")
    drain(rt, sid, TENANT)
    assert show(client, url)["stack_status"] == "CREATE_FAILED"


@pytest.mark.parametrize("name", ["cancel_update", "cancel_without_rollback"])
def test_cancel_with_nothing_in_progress_is_a_conflict(client: TestClient, rt: Runtime,
                                                       name: str) -> None:
    sid = create(client)["id"]
    drain(rt, sid, TENANT)
    url = f"{BASE}/stacks/web/{sid}"
    body = assert_heat_error(action(client, url, name), 409, "Conflict")
    assert body["error"]["message"] == ("The Stack (web) is CREATE_COMPLETE: only a create or "
                                        "an update in progress can be cancelled.")
    shown = show(client, url)
    assert (shown["stack_status"], shown["generation"]) == ("CREATE_COMPLETE", 1)


def test_cancel_honours_if_match(client: TestClient, rt: Runtime) -> None:
    _, url = update_in_progress(client, rt)
    r = action(client, url, "cancel_without_rollback", headers={"If-Match": "1"})
    assert_heat_error(r, 412, "PreconditionFailed")
    assert_heat_error(action(client, url, "cancel_update", headers={"If-Match": "two"}),
                      400, "HTTPBadRequest")
    shown = show(client, url)
    assert (shown["stack_status"], shown["generation"]) == ("UPDATE_IN_PROGRESS", 2)

    r = action(client, url, "cancel_without_rollback", headers={"If-Match": "2"})
    assert r.status_code == 200, r.text
    assert show(client, url)["stack_status"] == "UPDATE_FAILED"


# If-Match on update and delete -------------------------------------------------------------------

def test_if_match_mismatch_changes_nothing(client: TestClient, rt: Runtime) -> None:
    sid = create(client, parameters={"value": "one"})["id"]
    drain(rt, sid, TENANT)
    url = f"{BASE}/stacks/web/{sid}"
    body = {"template": TEMPLATE, "parameters": {"value": "two"}}
    for value in ("2", '"0"', 'W/"7"'):
        r = client.put(url, json=body, headers={"If-Match": value})
        answer = assert_heat_error(r, 412, "PreconditionFailed")
        assert "generation 1" in answer["error"]["message"]
        assert_heat_error(client.patch(url, json=body, headers={"If-Match": value}),
                          412, "PreconditionFailed")
        assert_heat_error(client.delete(url, headers={"If-Match": value}),
                          412, "PreconditionFailed")
    drain(rt, sid, TENANT)
    shown = show(client, url)
    assert (shown["stack_status"], shown["generation"]) == ("CREATE_COMPLETE", 1)
    assert shown["outputs"][0]["output_value"] == "one"
    assert entity_values(rt, sid) == {"first": "one", "second": "one"}


def test_if_match_garbage_is_a_bad_request(client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    drain(rt, sid, TENANT)
    url = f"{BASE}/stacks/web/{sid}"
    for value in ("one", "1.5", 'W/"x"', ""):
        r = client.put(url, json={"template": TEMPLATE}, headers={"If-Match": value})
        answer = assert_heat_error(r, 400, "HTTPBadRequest")
        assert "If-Match must be a stack generation" in answer["error"]["message"]
        assert_heat_error(client.delete(url, headers={"If-Match": value}),
                          400, "HTTPBadRequest")
    assert show(client, url)["generation"] == 1


def test_if_match_match_is_accepted(client: TestClient, rt: Runtime) -> None:
    sid = create(client, parameters={"value": "one"})["id"]
    drain(rt, sid, TENANT)
    url = f"{BASE}/stacks/web/{sid}"
    r = client.patch(url, json={"parameters": {"value": "two"}}, headers={"If-Match": "1"})
    assert r.status_code == 202, r.text
    assert r.json()["stack"]["generation"] == 2
    # The same If-Match again: the stack moved on, so the second writer is refused.
    r = client.patch(url, json={"parameters": {"value": "three"}}, headers={"If-Match": "1"})
    assert_heat_error(r, 412, "PreconditionFailed")
    drain(rt, sid, TENANT)
    assert show(client, url)["outputs"][0]["output_value"] == "two"

    r = client.patch(url, json={"parameters": {"value": "three"}}, headers={"If-Match": "*"})
    assert r.status_code == 202
    r = client.put(url, json={"template": TEMPLATE, "parameters": {"value": "four"}},
                   headers={"If-Match": 'W/"3"'})
    assert r.status_code == 202, r.text
    drain(rt, sid, TENANT)
    shown = show(client, url)
    assert (shown["generation"], shown["outputs"][0]["output_value"]) == (4, "four")

    assert client.delete(url, headers={"If-Match": '"4"'}).status_code == 204
    drain(rt, sid, TENANT)
    assert show(client, url)["stack_status"] == "DELETE_COMPLETE"


# disable_rollback -------------------------------------------------------------------------------

def test_disable_rollback_defaults_to_false_and_updates_keep_or_change_it(
        client: TestClient, rt: Runtime) -> None:
    sid = create(client)["id"]
    url = f"{BASE}/stacks/web/{sid}"
    assert show(client, url)["disable_rollback"] is False  # the list, as Heat's, omits it
    drain(rt, sid, TENANT)

    assert client.patch(url, json={"disable_rollback": True}).status_code == 202
    drain(rt, sid, TENANT)
    assert show(client, url)["disable_rollback"] is True
    assert client.patch(url, json={"parameters": {"value": "x"}}).status_code == 202  # kept
    drain(rt, sid, TENANT)
    assert show(client, url)["disable_rollback"] is True
    r = client.put(url, json={"template": TEMPLATE, "disable_rollback": False})
    assert r.status_code == 202
    drain(rt, sid, TENANT)
    assert show(client, url)["disable_rollback"] is False

    other = create(client, "kept", disable_rollback=True)["id"]
    assert show(client, f"{BASE}/stacks/kept/{other}")["disable_rollback"] is True
    preview = client.post(f"{BASE}/stacks/preview",
                          json={"stack_name": "p", "template": TEMPLATE}).json()["stack"]
    assert preview["disable_rollback"] is False
