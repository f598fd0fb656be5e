"""The API as a real ``convergence api`` process over PostgreSQL + Redis, with real workers.

The embedded API tests (``tests/api``) run the server over an in-process dispatcher; here the
API only enqueues, and the ``cluster``'s ``convergence worker`` processes run the traversals.
Against it: unmodified openstacksdk (``auth_type='none'`` with an orchestration endpoint
override, and ``auth_type='admin_token'`` with a token and an endpoint: the recipes of the Heat
API reference, section 2.4), its cloud layer's waiting ``create_stack``/``delete_stack``, the
``openstack`` CLI, the SSE watch stream (events committed by the workers reach it through the
stream's periodic read of the log) and tenant isolation with tokens.

Two API processes share the cluster for the module: one in noauth mode, one with
``CONVERGENCE_AUTH=token`` and the tokens file of ``tests/api/test_auth.py``. Each noauth test
uses a tenant of its own, since the database is shared by the whole run.
"""

from __future__ import annotations

import json
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openstack
import openstack.connection
import openstack.exceptions
import pytest

from tests.api import test_openstack_cli as cli
from tests.api import test_stream as sse
from tests.api.test_auth import TOK_A, TOK_B, TOKENS, hdr
from tests.api.test_openstacksdk import TEMPLATE, _wait
from tests.integration.conftest import ApiProcess, Cluster, run_api

WAIT_SECONDS = 60.0


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiProcess]:
    """``convergence api`` in noauth mode (the tenant is the URL's)."""
    with run_api(cluster, "noauth") as server:
        yield server


@pytest.fixture(scope="module")
def token_api(cluster: Cluster) -> Iterator[ApiProcess]:
    """``convergence api`` with ``CONVERGENCE_AUTH=token`` and the tokens of ``test_auth``."""
    tokens = cluster.logs / "tokens.yaml"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")  # JSON is YAML
    with run_api(cluster, "token", CONVERGENCE_AUTH="token",
                 CONVERGENCE_TOKENS_FILE=str(tokens)) as server:
        yield server


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def logs(cluster: Cluster, *apis: ApiProcess) -> str:
    return "\n".join([*(a.tail() for a in apis), cluster.logs_tail()])


def sdk_round_trip(conn: openstack.connection.Connection, name: str) -> None:
    """create, get by name and id, list, update, resources, events, delete: all through the
    SDK's orchestration proxy, the workers running each traversal."""
    orch = conn.orchestration
    created = orch.create_stack(name=name, template=TEMPLATE, parameters={"value": "one"},
                                timeout_mins=5)
    assert created.id

    stack = _wait(conn, name, WAIT_SECONDS)
    assert (stack.id, stack.status) == (created.id, "CREATE_COMPLETE")
    assert stack.outputs == [{"output_key": "copied", "output_value": "one",
                              "description": ""}]
    by_id = orch.get_stack(created.id)
    assert (by_id.name, by_id.status) == (name, "CREATE_COMPLETE")
    assert [s.name for s in orch.stacks()] == [name]

    orch.update_stack(stack, template=TEMPLATE, parameters={"value": "two"})
    stack = _wait(conn, created.id, WAIT_SECONDS)
    assert stack.status == "UPDATE_COMPLETE"
    assert stack.outputs[0]["output_value"] == "two"

    resources = {r.name: r.status for r in orch.resources(stack)}
    assert resources == {"first": "UPDATE_COMPLETE", "second": "CREATE_COMPLETE"}
    events = list(orch.stack_events(stack))
    assert [e.resource_status for e in events if e.resource_name == name] == [
        "CREATE_IN_PROGRESS", "CREATE_COMPLETE", "UPDATE_IN_PROGRESS", "UPDATE_COMPLETE"]

    orch.delete_stack(stack)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            orch.get_stack(created.id)  # a DELETE_COMPLETE stack is NotFound to the SDK
        except openstack.exceptions.NotFoundException:
            break
        assert time.monotonic() < deadline, "the stack was not deleted"
        time.sleep(0.1)
    with pytest.raises(openstack.exceptions.NotFoundException):
        orch.get_stack(name)
    assert list(orch.stacks()) == []


def test_openstacksdk_noauth(api: ApiProcess, cluster: Cluster) -> None:
    conn = openstack.connection.Connection(
        auth_type="none", orchestration_endpoint_override=f"{api.url}/v1/{tenant()}")
    try:
        sdk_round_trip(conn, "sdk")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs(cluster, api)}") from exc


def test_openstacksdk_admin_token(token_api: ApiProcess, cluster: Cluster) -> None:
    conn = openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": f"{token_api.url}/v1/tenantA",
                                       "token": TOK_A})
    try:
        sdk_round_trip(conn, "sdk-token")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs(cluster, token_api)}") from exc


def test_cloud_layer_waits(api: ApiProcess, tmp_path: Path) -> None:
    """``create_stack``/``delete_stack(wait=True)`` poll the event list (every 5 s) and
    return once the stack-level event of the action arrives (the delete: once the name is
    gone)."""
    template = tmp_path / "t.json"
    template.write_text(json.dumps(TEMPLATE))
    conn = openstack.connection.Connection(
        auth_type="none", orchestration_endpoint_override=f"{api.url}/v1/{tenant()}")

    stack = conn.create_stack("cloud", template_file=str(template), wait=True, value="hi")
    assert stack is not None
    assert (stack.name, stack.status) == ("cloud", "CREATE_COMPLETE")

    assert conn.delete_stack("cloud", wait=True) is True
    assert conn.get_stack("cloud") is None
    assert conn.delete_stack("cloud") is False


def test_openstack_cli(api: ApiProcess, tmp_path: Path) -> None:
    assert cli.OPENSTACK.exists(), "pip install -e '.[dev]' installs python-openstackclient"
    (tmp_path / "t.yaml").write_text(textwrap.dedent(cli.TEMPLATE))
    osc = cli.Openstack(api.url, tenant(), tmp_path)

    created = osc.json("stack", "create", "-t", "t.yaml", "--wait", "web")
    assert (created["stack_name"], created["stack_status"]) == ("web", "CREATE_COMPLETE")
    shown = osc.json("stack", "show", "web")
    assert shown["id"] == created["id"]
    assert shown["outputs"] == [{"output_key": "copied", "output_value": "one",
                                 "description": ""}]

    osc("stack", "delete", "--yes", "--wait", "web")  # exits 0 once the name is gone
    missing = osc("stack", "show", "web", check=False)
    assert missing.returncode == 1
    assert "Stack not found: web" in missing.stderr


def test_sse_stream_sees_a_traversal_run_by_the_workers(api: ApiProcess) -> None:
    project = tenant()
    got: list[sse.Message] = []
    created: list[str] = []
    failure: list[BaseException] = []

    with httpx.Client(base_url=api.url, timeout=httpx.Timeout(WAIT_SECONDS)) as http:
        def watch() -> None:
            try:
                got.extend(sse.read_stream(
                    http, f"/v1/{project}/events?watch=true",
                    lambda m: bool(created) and sse.is_complete(created[0])(m)))
            except BaseException as exc:  # shown by the test's thread
                failure.append(exc)

        # Connected before the stack exists: every event of the create is pushed to it.
        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        time.sleep(0.5)
        created.append(sse.create(http, "web", tenant=project))
        reader.join(WAIT_SECONDS)
        assert not reader.is_alive(), "the stream did not show CREATE_COMPLETE"
        assert not failure, failure
        events = sse.listed(http, sse.stack_path(project, "web", created[0]))

    assert [m.data for m in got] == events  # every event, in order, as the list has them
    assert [m.id for m in got] == sorted({m.id for m in got})
    assert (got[0].event, got[0].data["resource_status"]) == ("stack.status",
                                                              "CREATE_IN_PROGRESS")
    assert (got[-1].event, got[-1].data["resource_status"]) == ("stack.status",
                                                                "CREATE_COMPLETE")
    assert {m.data["resource_name"] for m in got if m.event == "resource.status"} == \
        {"first", "second", "third"}


def test_token_tenants_cannot_see_each_other(token_api: ApiProcess) -> None:
    with httpx.Client(base_url=token_api.url, timeout=httpx.Timeout(20.0),
                      headers=hdr(TOK_A)) as a, \
            httpx.Client(base_url=token_api.url, timeout=httpx.Timeout(20.0),
                         headers=hdr(TOK_B)) as b:
        assert a.get("/v1/tenantA/stacks", headers={"X-Auth-Token": ""}).status_code == 401
        mine = sse.create(a, "mine", tenant="tenantA")
        theirs = sse.create(b, "theirs", tenant="tenantB")
        sse.wait_complete(a, sse.stack_path("tenantA", "mine", mine))
        sse.wait_complete(b, sse.stack_path("tenantB", "theirs", theirs))

        assert [s["id"] for s in a.get("/v1/tenantA/stacks").json()["stacks"]] == [mine]
        assert [s["id"] for s in b.get("/v1/tenantB/stacks").json()["stacks"]] == [theirs]
        # Through the other's tenant URL: refused.
        assert a.get("/v1/tenantB/stacks").status_code == 403
        assert a.get(f"/v1/tenantB/stacks/theirs/{theirs}").status_code == 403
        assert b.delete(f"/v1/tenantA/stacks/mine/{mine}").status_code == 403
        # The other's stack under one's own tenant: it does not exist there.
        assert a.get(f"/v1/tenantA/stacks/{theirs}", follow_redirects=False).status_code == 404
        assert b.get("/v1/tenantB/stacks/mine", follow_redirects=False).status_code == 404
        events = b.get("/v1/tenantB/events").json()["events"]
        assert events and {e["links"][2]["href"].rsplit("/", 1)[1] for e in events} == \
            {theirs}
        # Nothing changed on A's side.
        shown = a.get(f"/v1/tenantA/stacks/mine/{mine}").json()["stack"]
        assert shown["stack_status"] == "CREATE_COMPLETE"

        for client, name, stack_id, project in ((a, "mine", mine, "tenantA"),
                                                (b, "theirs", theirs, "tenantB")):
            assert client.delete(sse.stack_path(project, name, stack_id)).status_code == 204
