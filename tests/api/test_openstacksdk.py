"""Unmodified openstacksdk against ``convergence api`` run as a real process.

The server listens on a free loopback port with a SQLite file of its own and runs its work on
the in-process dispatcher's background thread; the SDK connects with ``auth_type='none'`` and
an orchestration endpoint override (the recipe of the Heat API reference, section 2.4).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openstack
import openstack.exceptions
import pytest

from tests.api_process import running_api

TEMPLATE: dict[str, Any] = {
    "heat_template_version": "2018-08-31",
    "parameters": {"value": {"type": "string"}},
    "resources": {
        "first": {"type": "OS::Heat::TestResource",
                  "properties": {"value": {"get_param": "value"}}},
        "second": {"type": "OS::Heat::TestResource", "depends_on": ["first"]},
    },
    "outputs": {"copied": {"value": {"get_attr": ["first", "output"]}}},
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with running_api(tmp_path, "sdk.db") as url:
        yield url


def _wait(conn: Any, name_or_id: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        stack = conn.orchestration.get_stack(name_or_id)
        if not stack.status.endswith("IN_PROGRESS"):
            return stack
        assert time.monotonic() < deadline, stack.status
        time.sleep(0.1)


def test_openstacksdk_round_trip(server: str) -> None:
    conn = openstack.connection.Connection(
        auth_type="none", orchestration_endpoint_override=f"{server}/v1/tenant1")
    orch = conn.orchestration

    created = orch.create_stack(name="sdk", template=TEMPLATE,
                                parameters={"value": "hello"}, timeout_mins=5)
    assert created.id

    stack = _wait(conn, "sdk")
    assert stack.status == "CREATE_COMPLETE"
    assert stack.id == created.id
    assert stack.outputs == [{"output_key": "copied", "output_value": "hello",
                              "description": ""}]
    by_id = orch.get_stack(created.id)
    assert (by_id.name, by_id.status) == ("sdk", "CREATE_COMPLETE")

    assert [s.name for s in orch.stacks()] == ["sdk"]
    resources = {r.name: r.status for r in orch.resources(stack)}
    assert resources == {"first": "CREATE_COMPLETE", "second": "CREATE_COMPLETE"}
    events = list(orch.stack_events(stack))
    stack_events = [e.resource_status for e in events if e.resource_name == "sdk"]
    assert stack_events == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]

    orch.check_stack(stack)  # Heat's {"check": null} action
    checked = _wait(conn, "sdk")
    assert checked.status == "CHECK_COMPLETE"
    assert {r.name: r.status for r in orch.resources(stack)} == {
        "first": "CHECK_COMPLETE", "second": "CHECK_COMPLETE"}
    # Checking changed nothing: the outputs and the template are the same.
    assert checked.outputs == stack.outputs

    orch.delete_stack(stack)
    deadline = time.monotonic() + 60
    while True:
        try:
            orch.get_stack(created.id)  # a DELETE_COMPLETE stack is NotFound to the SDK
        except openstack.exceptions.NotFoundException:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with pytest.raises(openstack.exceptions.NotFoundException):
        orch.get_stack("sdk")
    assert list(orch.stacks()) == []


NESTED_CHILD = """
heat_template_version: 2018-08-31
parameters:
  value: {type: string}
resources:
  inner: {type: OS::Heat::TestResource, properties: {value: {get_param: value}}}
outputs:
  copied: {value: {get_attr: [inner, output]}}
"""


def test_nested_stacks_through_openstacksdk(server: str) -> None:
    """A template resource and a group, read back as Heat shows nested stacks: hidden from
    the stack list, each naming its parent, reached by the ``nested`` link of its resource
    (``openstack stack list --nested`` and ``resource list --nested-depth``: the CLI's
    tests)."""
    conn = openstack.connection.Connection(
        auth_type="none", orchestration_endpoint_override=f"{server}/v1/tenant1")
    orch = conn.orchestration
    template = {
        "heat_template_version": "2018-08-31",
        "resources": {
            "node": {"type": "child.yaml", "properties": {"value": "hello"}},
            "group": {"type": "OS::Heat::ResourceGroup", "properties": {
                "count": 2, "resource_def": {"type": "child.yaml",
                                             "properties": {"value": "m%index%"}}}},
        },
        "outputs": {"node": {"value": {"get_attr": ["node", "copied"]}},
                    "members": {"value": {"get_attr": ["group", "copied"]}}},
    }
    created = orch.create_stack(name="tree", template=template,
                                files={"child.yaml": NESTED_CHILD})
    stack = _wait(conn, "tree")
    assert stack.status == "CREATE_COMPLETE", stack.status_reason
    assert {o["output_key"]: o["output_value"] for o in stack.outputs} == {
        "node": "hello", "members": ["m0", "m1"]}

    assert [s.name for s in orch.stacks()] == ["tree"]  # nested ones are not listed
    own = {r.name: r for r in orch.resources(stack)}
    assert sorted(own) == ["group", "node"]
    for name in ("node", "group"):
        child = orch.get_stack(own[name].physical_resource_id)
        assert child.parent_id == created.id
        assert child.status == "CREATE_COMPLETE"
        links = {link["rel"]: link["href"] for link in own[name].links}
        assert links["nested"].endswith(f"/{child.name}/{child.id}")
    members = {r.name: r for r in orch.resources(own["group"].physical_resource_id)}
    assert sorted(members) == ["0", "1"]

    orch.delete_stack(stack)
    deadline = time.monotonic() + 60
    while True:
        try:
            orch.get_stack(created.id)  # a DELETE_COMPLETE stack is NotFound to the SDK
        except openstack.exceptions.NotFoundException:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with pytest.raises(openstack.exceptions.NotFoundException):
        orch.get_stack("sdk")
    assert list(orch.stacks()) == []
