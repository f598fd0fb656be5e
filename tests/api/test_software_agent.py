"""Software deployments end to end: a real ``convergence api`` process whose engine boots
servers in the simulated cloud, each server's simulated agent polling its signed metadata
URL, running ``script`` configs for real (the cloud is started to execute them, which it does
not by default) and signalling back; unmodified openstacksdk reads
the configs and deployments through the API, and the simulated cloud's run log says what ran
where, in what order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openstack
import pytest

from convergence_simcloud.client import SimControl
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.api_process import api_process

TENANT = "ops"

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  greeting: {type: string, default: hello}
resources:
  net: {type: OS::Neutron::Net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.9.0.0/24}
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: m1.tiny
      networks: [{network: {get_resource: net}}]
      user_data_format: SOFTWARE_CONFIG
  say:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{name: greeting}, {name: upstream}]
      outputs: [{name: said}]
      config: |
        #!/bin/sh
        echo "running for $deploy_resource_name"
        printf '%s from %s' "$greeting" "$upstream" > "${heat_outputs_path}.said"
  first:
    type: OS::Heat::SoftwareDeployment
    depends_on: subnet
    properties:
      name: 10_first
      config: {get_resource: say}
      server: {get_resource: server}
      signal_transport: TEMP_URL_SIGNAL
      input_values: {greeting: {get_param: greeting}, upstream: nobody}
  second:
    type: OS::Heat::SoftwareDeployment
    properties:
      name: 20_second
      config: {get_resource: say}
      server: {get_resource: server}
      signal_transport: HEAT_SIGNAL
      input_values: {greeting: again, upstream: {get_attr: [first, said]}}
  failing:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: |
        #!/bin/sh
        echo "no disk left" >&2
        exit 4
outputs:
  said: {value: {get_attr: [second, said]}}
  stdout: {value: {get_attr: [first, deploy_stdout]}}
"""


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[SimCloud, str, Path]]:
    state = SimCloud(options=Options(build_seconds=0.2, agent_poll_interval=0.2,
                                     agent_execute_scripts=True))
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        yield state, url, path


def wait_for(client: httpx.Client, path: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        stack = client.get(path).json()["stack"]
        if not stack["stack_status"].endswith("IN_PROGRESS"):
            return dict(stack)
        assert time.monotonic() < deadline, stack["stack_status"]
        time.sleep(0.2)


def test_deployments_run_on_the_simulated_servers_and_chain(
        cloud: tuple[SimCloud, str, Path], tmp_path: Path) -> None:
    _, cloud_url, clouds = cloud
    env = {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(clouds)}
    with api_process(tmp_path, "software.db", env) as (_, url, _log), \
            httpx.Client(base_url=f"{url}/v1/{TENANT}", timeout=30,
                         follow_redirects=True) as client:
        made = client.post("/stacks", json={"stack_name": "sw", "template": TEMPLATE})
        assert made.status_code == 201, made.text
        stack = wait_for(client, "/stacks/sw")
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        outputs = {o["output_key"]: o["output_value"] for o in stack["outputs"]}
        assert outputs["said"] == "again from hello from nobody"
        assert outputs["stdout"].strip() == "running for first"

        # what ran, where, in order: the simulated cloud's agent log
        control = SimControl(cloud_url)
        runs = control.agent_runs()
        assert [(r.name, r.status_code, r.signalled) for r in runs] == [
            ("10_first", 0, True), ("20_second", 0, True)]
        server_id = client.get("/stacks/sw/resources/server").json()["resource"][
            "physical_resource_id"]
        assert {r.server_id for r in runs} == {server_id}

        # unmodified openstacksdk reads the deployments and the configs
        sdk = openstack.connection.Connection(
            auth_type="none", orchestration_endpoint_override=f"{url}/v1/{TENANT}")
        deployments = list(sdk.orchestration.software_deployments(server_id=server_id))
        assert sorted(d.status for d in deployments) == ["COMPLETE", "COMPLETE"]
        first = next(d for d in deployments
                     if d.output_values.get("said") == "hello from nobody")
        config = sdk.orchestration.get_software_config(first.config_id)
        assert config.group == "script" and config.name == "10_first"
        assert {c.id for c in sdk.orchestration.software_configs()} >= {config.id}
        metadata = client.get(f"/software_deployments/metadata/{server_id}").json()
        assert [m["name"] for m in metadata["metadata"]] == ["10_first", "20_second"]

        # a new greeting re-runs both (the second reads the first's output), nothing else
        changed = client.patch("/stacks/sw/" + stack["id"],
                               json={"parameters": {"greeting": "bonjour"}})
        assert changed.status_code == 202, changed.text
        stack = wait_for(client, "/stacks/sw")
        assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
        outputs = {o["output_key"]: o["output_value"] for o in stack["outputs"]}
        assert outputs["said"] == "again from bonjour from nobody"
        again = control.agent_runs(since=runs[-1].seq)
        assert [r.name for r in again] == ["10_first", "20_second"]
        events = client.get("/stacks/sw/events", params={"limit": 500}).json()["events"]
        updated = {e["resource_name"] for e in events
                   if e["resource_status"] == "UPDATE_IN_PROGRESS"}
        assert {"first", "second"} <= updated and not updated & {"server", "net", "say"}

        # a failing script fails its deployment, its stderr in the reason
        failing = TEMPLATE.replace("config: {get_resource: say}\n      server: "
                                   "{get_resource: server}\n      signal_transport: "
                                   "HEAT_SIGNAL",
                                   "config: {get_resource: failing}\n      server: "
                                   "{get_resource: server}\n      signal_transport: "
                                   "HEAT_SIGNAL")
        assert failing != TEMPLATE
        changed = client.put("/stacks/sw/" + stack["id"],
                             json={"template": failing, "disable_rollback": True})
        assert changed.status_code == 202, changed.text
        stack = wait_for(client, "/stacks/sw")
        assert stack["stack_status"] == "UPDATE_FAILED"
        second = client.get("/stacks/sw/resources/second").json()["resource"]
        assert second["resource_status"] == "UPDATE_FAILED"
        assert "non-zero status code: 4" in second["resource_status_reason"]
        assert "no disk left" in second["resource_status_reason"]


def test_a_wait_condition_lifted_by_curl_style_signals(tmp_path: Path) -> None:
    template = """
heat_template_version: 2018-08-31
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, count: 2, timeout: 300}
outputs:
  curl: {value: {get_attr: [handle, curl_cli]}}
  endpoint: {value: {get_attr: [handle, endpoint]}}
  data: {value: {get_attr: [wait, data]}}
"""
    with api_process(tmp_path, "wait.db") as (_, url, log), \
            httpx.Client(base_url=f"{url}/v1/{TENANT}", timeout=30,
                         follow_redirects=True) as client:
        assert client.post("/stacks", json={"stack_name": "w", "template": template}
                           ).status_code == 201
        deadline = time.monotonic() + 30
        while True:
            # Not found until the create's plan has made the stack's records.
            got = client.get("/stacks/w/resources/handle")
            handle = got.json()["resource"] if got.status_code == 200 else {}
            if handle.get("resource_status") == "CREATE_COMPLETE":
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        endpoint = handle["attributes"]["endpoint"] if "attributes" in handle else \
            client.get("/stacks/w/resources/handle").json()["resource"]["attributes"][
                "endpoint"]
        assert endpoint.startswith(url + "/v1/signed/")
        # the signed URL is the credential: no token, and nothing else is reachable by it
        assert httpx.post(endpoint, json={"status": "SUCCESS", "data": "one"}).status_code \
            == 200
        assert httpx.get(endpoint).status_code == 404
        assert httpx.post(endpoint[:-3] + "xyz", json={}).status_code == 404
        assert client.get("/stacks/w").json()["stack"]["stack_status"] == \
            "CREATE_IN_PROGRESS"
        assert httpx.put(endpoint, json={"data": "two", "id": "b"}).status_code == 200
        stack = wait_for(client, "/stacks/w")
        assert stack["stack_status"] == "CREATE_COMPLETE"
        outputs = {o["output_key"]: o["output_value"] for o in stack["outputs"]}
        assert outputs["data"] == '{"1": "one", "b": "two"}'
        assert outputs["curl"].startswith("curl -i -X POST -H 'X-Auth-Token: ")
        # the token is the credential: the access log shows the path without it
        token = endpoint.rsplit("/", 1)[1]
        logged = log.read_text()
        assert "/v1/signed/***" in logged and token not in logged
