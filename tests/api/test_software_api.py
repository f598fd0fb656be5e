"""Heat's software configuration API: configs (immutable), deployments, a server's metadata,
the checks on what a caller sends (a 400 naming the field, nothing stored), tenancy (another
tenant's config or deployment is not found), a PUT that reports on a stack's deployment
waking it, and the signed URLs refusing what they were not made for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import open_runtime
from convergence.services import software
from convergence.settings import Settings

A, B = "/v1/tenantA", "/v1/tenantB"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    rt = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'sw.db'}"))
    with TestClient(create_app(rt)) as c:
        yield c


CONFIG = {"name": "hello", "group": "script", "config": "#!/bin/sh\necho hi",
          "inputs": [{"name": "who", "default": "world"}], "outputs": [{"name": "said"}],
          "options": {"a": 1}}


def test_configs_are_made_read_listed_and_deleted(client: TestClient) -> None:
    made = client.post(f"{A}/software_configs", json=CONFIG)
    assert made.status_code == 200, made.text
    config = made.json()["software_config"]
    assert {k: config[k] for k in CONFIG} == CONFIG
    assert config["id"] and config["creation_time"].endswith("Z")
    shown = client.get(f"{A}/software_configs/{config['id']}").json()["software_config"]
    assert shown == config
    second = client.post(f"{A}/software_configs", json={"name": "two"}).json()
    listed = client.get(f"{A}/software_configs").json()["software_configs"]
    assert [c["id"] for c in listed] == [config["id"], second["software_config"]["id"]]
    page = client.get(f"{A}/software_configs", params={"limit": 1, "marker": config["id"]})
    assert [c["name"] for c in page.json()["software_configs"]] == ["two"]
    # another tenant sees none of it
    assert client.get(f"{B}/software_configs/{config['id']}").status_code == 404
    assert client.get(f"{B}/software_configs").json()["software_configs"] == []
    assert client.delete(f"{B}/software_configs/{config['id']}").status_code == 404
    assert client.delete(f"{A}/software_configs/{config['id']}").status_code == 204
    assert client.get(f"{A}/software_configs/{config['id']}").status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"name": 3}, "software_config.name"),
    ({"inputs": "x"}, "software_config.inputs"),
    ({"inputs": [{"type": "String"}]}, "software_config.inputs"),
    ({"options": []}, "software_config.options"),
    ({"colour": "red"}, "'colour'"),
])
def test_a_bad_config_is_refused_naming_the_field(client: TestClient, body: dict[str, object],
                                                  field: str) -> None:
    r = client.post(f"{A}/software_configs", json=body)
    assert r.status_code == 400
    assert field in r.json()["error"]["message"]
    assert client.get(f"{A}/software_configs").json()["software_configs"] == []


def test_deployments_and_a_servers_metadata(client: TestClient) -> None:
    config = client.post(f"{A}/software_configs", json=CONFIG).json()["software_config"]
    other = client.post(f"{A}/software_configs",
                        json={**CONFIG, "name": "a-first"}).json()["software_config"]
    assert client.post(f"{A}/software_deployments",
                       json={"server_id": "s1"}).status_code == 400
    assert client.post(f"{A}/software_deployments", json={
        "config_id": "nope", "server_id": "s1"}).status_code == 404
    made = client.post(f"{A}/software_deployments", json={
        "config_id": config["id"], "server_id": "s1", "action": "CREATE",
        "status": "IN_PROGRESS", "input_values": {"who": "you"}})
    assert made.status_code == 200, made.text
    dep = made.json()["software_deployment"]
    assert (dep["status"], dep["input_values"], dep["server_id"]) == \
        ("IN_PROGRESS", {"who": "you"}, "s1")
    client.post(f"{A}/software_deployments", json={"config_id": other["id"],
                                                    "server_id": "s1"})
    client.post(f"{A}/software_deployments", json={"config_id": other["id"],
                                                    "server_id": "s2"})
    listed = client.get(f"{A}/software_deployments", params={"server_id": "s1"}).json()
    assert len(listed["software_deployments"]) == 2
    metadata = client.get(f"{A}/software_deployments/metadata/s1").json()["metadata"]
    assert [m["name"] for m in metadata] == ["a-first", "hello"]  # by name
    assert client.get(f"{B}/software_deployments/metadata/s1").json()["metadata"] == []
    assert client.get(f"{B}/software_deployments/{dep['id']}").status_code == 404
    bad = client.put(f"{A}/software_deployments/{dep['id']}", json={"status": "DONE"})
    assert bad.status_code == 400 and "status" in bad.json()["error"]["message"]
    put = client.put(f"{A}/software_deployments/{dep['id']}", json={
        "status": "COMPLETE", "output_values": {"said": "hi you"}})
    assert put.status_code == 200
    shown = client.get(f"{A}/software_deployments/{dep['id']}").json()["software_deployment"]
    assert (shown["status"], shown["output_values"]) == ("COMPLETE", {"said": "hi you"})
    assert client.delete(f"{A}/software_deployments/{dep['id']}").status_code == 204
    assert client.get(f"{A}/software_deployments/{dep['id']}").status_code == 404


STACK = """
heat_template_version: 2018-08-31
resources:
  cfg:
    type: OS::Heat::SoftwareConfig
    properties: {group: ansible, outputs: [{name: color}]}
  dep:
    type: OS::Heat::SoftwareDeployment
    properties: {config: {get_resource: cfg}, server: srv-x, input_values: {color: blue}}
outputs:
  color: {value: {get_attr: [dep, color]}}
"""


def wait_status(client: TestClient, name: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        stack = client.get(f"{A}/stacks/{name}", follow_redirects=True).json()["stack"]
        if not str(stack["stack_status"]).endswith("IN_PROGRESS"):
            return dict(stack)
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_put_that_ends_a_stacks_deployment_lets_its_resource_go_on(
        client: TestClient) -> None:
    assert client.post(f"{A}/stacks", json={"stack_name": "s", "template": STACK}
                       ).status_code == 201
    deadline = time.monotonic() + 30
    while True:
        found = client.get(f"{A}/software_deployments",
                           params={"server_id": "srv-x"}).json()["software_deployments"]
        if found:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (dep,) = found
    assert dep["status"] == "IN_PROGRESS"
    signal_url = next(i["value"] for i in client.get(
        f"{A}/software_configs/{dep['config_id']}").json()["software_config"]["inputs"]
        if i["name"] == "deploy_signal_id")
    token = signal_url.rsplit("/", 1)[1]
    # a deployment's token reports on it, and does nothing else
    assert client.get(f"/v1/signed/{token}").status_code == 404
    assert client.post(f"/v1/signed/{token[:-2]}zz", json={}).status_code == 404
    assert client.put(f"{A}/software_deployments/{dep['id']}", json={
        "status": "COMPLETE", "output_values": {"color": "green"}}).status_code == 200
    stack = wait_status(client, "s")
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert [o["output_value"] for o in stack["outputs"]] == ["green"]


def test_outcome_reads_a_report_as_heat_does() -> None:
    outputs = [{"name": "result"}, {"name": "problem", "error_output": True}]
    assert software.outcome({"deploy_status_code": 0, "result": "x"}, outputs) == (
        "COMPLETE", "Outputs received", {"result": "x", "deploy_status_code": 0})
    status, reason, _ = software.outcome({"deploy_status_code": "2",
                                          "deploy_stderr": "boom\n"}, outputs)
    assert status == "FAILED"
    assert reason == ("deploy_status_code : Deployment exited with non-zero status code: 2, "
                      "deploy_stderr : boom")
    status, reason, _ = software.outcome({"problem": "bad disk"}, outputs)
    assert (status, reason) == ("FAILED", "problem : bad disk")
