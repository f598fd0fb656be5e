"""What the API's errors tell, and what they keep: two tenants in token mode, each a member.

- A deployment's id is the engine's to give: a tenant that names another tenant's
  deployment id in its ``POST software_deployments`` gets a deployment of its own under a new
  id, learns nothing of the other's, whose row stays as it was.
- An unexpected error (here a database refusal the test puts in the real server's own
  database) answers a 500 in Heat's error shape that tells nothing of it, only a request id,
  which the server's log has beside the exception; every answer carries its request id.
- A signal's body goes through the same reader as a stack's: nested 100,000 deep it is a 400
  at every route a signal comes by (the signed URLs of a deployment, a wait condition handle
  and a scaling policy; a resource's ``.../signal``; a deployment's ``PUT``), too large a 413,
  and the signalled things are left as they were.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings
from tests.api.test_stacks_api import assert_heat_error
from tests.api_process import api_process

TOK_A = "token-of-tenant-a"
TOK_B = "token-of-tenant-b"
TOKENS = {TOK_A: {"project": "tenantA", "roles": ["member"]},
          TOK_B: {"project": "tenantB", "roles": ["member"]}}
A, B = "/v1/tenantA", "/v1/tenantB"
REQUEST_ID = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# What a 500 must not show of its cause.
INTERNALS = ("Traceback", "SELECT", "INSERT", "sqlite", "psycopg", "software_configs",
             "IntegrityError", "refused by the test")
DEEP = b"[" * 100_000
MAX_BODY = 256 * 1024

CONFIG = {"name": "hello", "group": "script", "config": "#!/bin/sh\necho hi"}


def hdr(token: str) -> dict[str, str]:
    return {"X-Auth-Token": token}


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS), encoding="utf-8")
    return path


@pytest.fixture
def rt(tmp_path: Path, tokens_file: Path) -> Runtime:
    return open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'errors.db'}",
                                 auth="token", tokens_file=str(tokens_file),
                                 max_request_bytes=MAX_BODY))


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    # Errors are answered, not raised: what the caller sees is what is checked.
    with TestClient(create_app(rt), raise_server_exceptions=False) as c:
        yield c


def made(r: httpx.Response, key: str) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return dict(r.json()[key])


# A deployment's id ---------------------------------------------------------------------------

def test_a_deployment_id_of_another_tenant_is_neither_taken_nor_told(
        client: TestClient, rt: Runtime) -> None:
    config_a = made(client.post(f"{A}/software_configs", json=CONFIG, headers=hdr(TOK_A)),
                    "software_config")
    dep_a = made(client.post(f"{A}/software_deployments", headers=hdr(TOK_A), json={
        "config_id": config_a["id"], "server_id": "server-of-a", "status": "IN_PROGRESS",
        "input_values": {"secret": "of a"}}), "software_deployment")
    with rt.store.read() as tx:
        row_before = tx.software_deployment(dep_a["id"])
    config_b = made(client.post(f"{B}/software_configs", json=CONFIG, headers=hdr(TOK_B)),
                    "software_config")

    answers = []
    for key in ("id", "deployment_id"):
        r = client.post(f"{B}/software_deployments", headers=hdr(TOK_B), json={
            key: dep_a["id"], "config_id": config_b["id"], "server_id": "server-of-b"})
        answers.append(made(r, "software_deployment"))
        assert dep_a["id"] not in r.text and "of a" not in r.text
    # B got deployments of its own, each under a new id, as if it had named none.
    plain = made(client.post(f"{B}/software_deployments", headers=hdr(TOK_B), json={
        "config_id": config_b["id"], "server_id": "server-of-b"}), "software_deployment")
    for answer in answers:
        assert answer["id"] not in (dep_a["id"], plain["id"])
        assert {k: v for k, v in answer.items() if k not in ("id", "creation_time",
                                                             "updated_time")} == \
            {k: v for k, v in plain.items() if k not in ("id", "creation_time",
                                                         "updated_time")}
    listed = client.get(f"{B}/software_deployments", headers=hdr(TOK_B)).json()
    assert {d["id"] for d in listed["software_deployments"]} == \
        {answers[0]["id"], answers[1]["id"], plain["id"]}
    assert client.get(f"{B}/software_deployments/{dep_a['id']}",
                      headers=hdr(TOK_B)).status_code == 404
    # A's deployment is as it was: its row, and what A reads of it.
    with rt.store.read() as tx:
        assert tx.software_deployment(dep_a["id"]) == row_before
    shown = client.get(f"{A}/software_deployments/{dep_a['id']}", headers=hdr(TOK_A))
    assert made(shown, "software_deployment") == dep_a
    # Naming its own deployment's id makes A a new one too (Heat takes no id from a caller).
    again = made(client.post(f"{A}/software_deployments", headers=hdr(TOK_A), json={
        "id": dep_a["id"], "config_id": config_a["id"], "server_id": "server-of-a"}),
        "software_deployment")
    assert again["id"] != dep_a["id"]


# An unexpected error ------------------------------------------------------------------------

def wait_for_line(log: Path, text: str, timeout: float = 10) -> str:
    """The server's log once it has a line with ``text`` (its handler writes it at once)."""
    deadline = time.monotonic() + timeout
    while True:
        logged = log.read_text(errors="replace")
        if text in logged:
            return logged
        assert time.monotonic() < deadline, f"{text} is not in the log:\n{logged}"
        time.sleep(0.05)


def test_an_unexpected_error_answers_a_500_that_tells_only_its_request_id(
        tmp_path: Path, tokens_file: Path) -> None:
    env = {"CONVERGENCE_AUTH": "token", "CONVERGENCE_TOKENS_FILE": str(tokens_file)}
    with api_process(tmp_path, "leak.db", env) as (_, url, log), \
            httpx.Client(base_url=url, headers=hdr(TOK_A), timeout=30) as client:
        fine = client.post(f"{A}/software_configs", json=CONFIG)
        assert fine.status_code == 200, fine.text
        # The database refuses every new config from now on, as a constraint would.
        with sqlite3.connect(tmp_path / "leak.db") as db:
            db.execute("CREATE TRIGGER refuse_configs BEFORE INSERT ON software_configs "
                       "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")

        r = client.post(f"{A}/software_configs", json=CONFIG)
        body = assert_heat_error(r, 500, "HTTPInternalServerError")
        for internal in INTERNALS:
            assert internal not in r.text, r.text
        rid = r.headers["X-Openstack-Request-Id"]
        assert REQUEST_ID.fullmatch(rid)
        assert rid in body["error"]["message"]
        # The log has the exception under that id: where an operator finds what happened.
        logged = wait_for_line(log, rid)
        line = next(ln for ln in logged.splitlines() if rid in ln)
        assert "unexpected error in the API" in line
        after = logged[logged.index(line):]
        assert "IntegrityError" in after and "refused by the test" in after
        # Once: the server was not handed the exception to log again (nor to drop the
        # connection, which the requests below reuse).
        assert "Exception in ASGI application" not in logged

        # Every answer has an id of its own: a success, a refusal, an unknown path.
        ids = {rid}
        for got in (client.get(f"{A}/software_configs"),
                    client.get(f"{A}/software_configs/none"),
                    client.get("/nowhere")):
            assert got.status_code in (200, 404), got.text
            assert REQUEST_ID.fullmatch(got.headers["X-Openstack-Request-Id"])
            ids.add(got.headers["X-Openstack-Request-Id"])
        assert len(ids) == 4
        # What was stored before the refusal is still read.
        listed = client.get(f"{A}/software_configs").json()["software_configs"]
        assert [c["id"] for c in listed] == [fine.json()["software_config"]["id"]]


# Signals' bodies ------------------------------------------------------------------------------

SIGNALLED = """
heat_template_version: 2018-08-31
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, outputs: [{name: color}]}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: srv-x}
  handle:
    type: OS::Heat::WaitConditionHandle
  asg:
    type: OS::Heat::AutoScalingGroup
    properties: {min_size: 1, max_size: 3, resource: {type: OS::Heat::None}}
  up:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: change_in_capacity
      scaling_adjustment: 1
"""


def attribute(client: TestClient, stack: str, resource: str, name: str,
              timeout: float = 30) -> Any:
    """A resource's attribute once the resource is created."""
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"{A}/stacks/{stack}/resources/{resource}", headers=hdr(TOK_A),
                       follow_redirects=True)
        found = r.json().get("resource", {}) if r.status_code == 200 else {}
        if found.get("resource_status") == "CREATE_COMPLETE":
            return found["attributes"][name]
        assert time.monotonic() < deadline, r.text
        time.sleep(0.05)


def path_of(url: str) -> str:
    return urlsplit(url).path


def test_deep_and_large_signals_are_refused_at_every_signal_route(client: TestClient) -> None:
    r = client.post(f"{A}/stacks", headers=hdr(TOK_A),
                    json={"stack_name": "sig", "template": SIGNALLED})
    assert r.status_code == 201, r.text
    stack_path = f"{A}/stacks/sig/{r.json()['stack']['id']}"
    handle_url = path_of(attribute(client, "sig", "handle", "endpoint"))
    policy_url = path_of(attribute(client, "sig", "up", "alarm_url"))
    deadline = time.monotonic() + 30
    while True:
        found = client.get(f"{A}/software_deployments", params={"server_id": "srv-x"},
                           headers=hdr(TOK_A)).json()["software_deployments"]
        if found:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (dep,) = found
    assert dep["status"] == "IN_PROGRESS"
    derived = client.get(f"{A}/software_configs/{dep['config_id']}", headers=hdr(TOK_A))
    deployment_url = path_of(next(i["value"] for i in derived.json()["software_config"][
        "inputs"] if i["name"] == "deploy_signal_id"))
    for url in (handle_url, policy_url, deployment_url):
        assert url.startswith("/v1/signed/")
    size = attribute(client, "sig", "asg", "current_size")
    generation = client.get(stack_path, headers=hdr(TOK_A)).json()["stack"]["generation"]
    routes: list[tuple[str, str, dict[str, str]]] = [
        ("POST", deployment_url, {}), ("PUT", deployment_url, {}),
        ("POST", handle_url, {}), ("PUT", handle_url, {}),
        ("POST", policy_url, {}),
        ("POST", f"{stack_path}/resources/dep/signal", hdr(TOK_A)),
        ("POST", f"{stack_path}/resources/handle/signal", hdr(TOK_A)),
        ("POST", f"{stack_path}/resources/up/signal", hdr(TOK_A)),
        ("PUT", f"{A}/software_deployments/{dep['id']}", hdr(TOK_A)),
    ]
    too_large = json.dumps({"data": "x" * MAX_BODY}).encode()
    for method, url, headers in routes:
        headers = {**headers, "Content-Type": "application/json"}
        deep = client.request(method, url, content=DEEP, headers=headers)
        body = assert_heat_error(deep, 400, "MalformedRequestBody")
        assert "nesting is deeper than" in body["error"]["message"], (method, url)
        large = client.request(method, url, content=too_large, headers=headers)
        assert_heat_error(large, 413, "RequestLimitExceeded")

    # Nothing was signalled: the deployment waits, the handle has no data, the group's size
    # and the stack are as they were.
    shown = client.get(f"{A}/software_deployments/{dep['id']}", headers=hdr(TOK_A))
    assert made(shown, "software_deployment")["status"] == "IN_PROGRESS"
    assert attribute(client, "sig", "asg", "current_size") == size == 1
    stack = client.get(stack_path, headers=hdr(TOK_A)).json()["stack"]
    assert stack["generation"] == generation
    events = client.get(f"{stack_path}/events", headers=hdr(TOK_A)).json()["events"]
    assert not [e for e in events if e["resource_status"].startswith("SIGNAL")]
