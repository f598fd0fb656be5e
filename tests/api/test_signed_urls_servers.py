"""A server's signed URLs after it is replaced, through a real ``convergence api`` process in
token mode whose engine boots servers in the simulated cloud (each server's simulated agent
polling its metadata URL and reporting on its deployments).

A flavor change with ``flavor_update_policy: REPLACE`` makes a new server, to which the
deployment is applied again: the old server's metadata URL and the deployment URL it was
given answer 404 and change nothing; the new server's URL lists the deployment. And a
signature that is not ASCII answers 404, as any signature that does not verify.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.api_process import api_process

TENANT = "tenantA"
TOKENS = {"token-of-a": {"project": TENANT, "roles": ["member"]},
          "token-of-b": {"project": "tenantB", "roles": ["member"]}}

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.tiny}
resources:
  net: {type: OS::Neutron::Net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.9.0.0/24}
  server:
    type: OS::Nova::Server
    properties:
      image: cirros
      flavor: {get_param: flavor}
      flavor_update_policy: REPLACE
      networks: [{network: {get_resource: net}}]
      user_data_format: SOFTWARE_CONFIG
  hello:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, config: "#!/bin/sh\\necho hello"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    depends_on: subnet
    properties:
      config: {get_resource: hello}
      server: {get_resource: server}
      signal_transport: TEMP_URL_SIGNAL
"""


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[SimCloud, Path]]:
    state = SimCloud(options=Options(build_seconds=0.2, agent_poll_interval=0.2))
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        yield state, path


@pytest.fixture
def api(cloud: tuple[SimCloud, Path], tmp_path: Path) -> Iterator[tuple[httpx.Client, str]]:
    """The API in token mode, tenant A's stacks in the simulated cloud; a client of A's."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")
    env = {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(cloud[1]),
           "CONVERGENCE_AUTH": "token", "CONVERGENCE_TOKENS_FILE": str(tokens),
           "CONVERGENCE_PROJECT_CLOUDS": f"{TENANT}=simcloud"}
    with api_process(tmp_path, "servers.db", env) as (_, url, _log), \
            httpx.Client(base_url=f"{url}/v1/{TENANT}", timeout=30, follow_redirects=True,
                         headers={"X-Auth-Token": "token-of-a"}) as client:
        yield client, url


def settled(client: httpx.Client, path: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        stack = client.get(path).json()["stack"]
        if not stack["stack_status"].endswith("IN_PROGRESS"):
            return dict(stack)
        assert time.monotonic() < deadline, stack["stack_status"]
        time.sleep(0.2)


def metadata_url(state: SimCloud, server_id: str) -> str:
    """The signed URL the server's agent polls, as its user_data tells it."""
    with state.locked():
        user_data = state.kind("server")[server_id]["user_data"]
    found = re.search(r"https?://[^\s\"']+/v1/signed/[A-Za-z0-9_.\-]+",
                      base64.b64decode(user_data).decode())
    assert found is not None, "the server was not told where to poll"
    return found.group(0)


def deployment_url(client: httpx.Client, server_id: str) -> tuple[str, str]:
    """(the deployment's id, the URL its derived config gives the agent to report on)."""
    (dep,) = client.get("/software_deployments",
                        params={"server_id": server_id}).json()["software_deployments"]
    config = client.get(f"/software_configs/{dep['config_id']}").json()["software_config"]
    return dep["id"], next(i["value"] for i in config["inputs"]
                           if i["name"] == "deploy_signal_id")


def test_a_replaced_servers_urls_are_404_and_the_new_servers_work(
        cloud: tuple[SimCloud, Path], api: tuple[httpx.Client, str]) -> None:
    state, _ = cloud
    client, _ = api
    made = client.post("/stacks", json={"stack_name": "sw", "template": TEMPLATE})
    assert made.status_code == 201, made.text
    stack = settled(client, "/stacks/sw")
    assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
    old_server = client.get("/stacks/sw/resources/server").json()["resource"][
        "physical_resource_id"]
    old_metadata = metadata_url(state, old_server)
    dep_id, old_report = deployment_url(client, old_server)
    listed = httpx.get(old_metadata)
    assert listed.status_code == 200 and len(listed.json()["deployments"]) == 1

    changed = client.patch(f"/stacks/sw/{stack['id']}", json={"parameters": {
        "flavor": "m1.small"}})
    assert changed.status_code == 202, changed.text
    stack = settled(client, "/stacks/sw")
    assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
    new_server = client.get("/stacks/sw/resources/server").json()["resource"][
        "physical_resource_id"]
    assert new_server != old_server
    before = client.get(f"/software_deployments/{dep_id}").json()["software_deployment"]
    assert before["server_id"] == new_server and before["status"] == "COMPLETE"

    # the old server's URLs reach nothing
    assert httpx.get(old_metadata).status_code == 404
    stale = httpx.put(old_report, json={"deploy_status_code": 1, "deploy_stderr": "boom"})
    assert stale.status_code == 404, stale.text
    after = client.get(f"/software_deployments/{dep_id}").json()["software_deployment"]
    assert after == before
    assert client.get("/stacks/sw").json()["stack"]["stack_status"] == "UPDATE_COMPLETE"
    # the new server's URL is its own, and lists the deployment applied to it
    new_metadata = metadata_url(state, new_server)
    assert new_metadata != old_metadata
    listed = httpx.get(new_metadata)
    assert listed.status_code == 200
    assert [d["id"] for d in listed.json()["deployments"]] == [after["config_id"]]


def test_a_signature_that_is_not_ascii_is_404(api: tuple[httpx.Client, str]) -> None:
    _, url = api
    for token in ("eyJrIjoic2lnbmFsIn0.sig\u00e9", "\u00e9t\u00e9.\u00e9t\u00e9",
                  "eyJrIjoic2lnbmFsIn0.\U0001f511"):
        for verb in ("GET", "POST", "PUT"):
            answer = httpx.request(verb, f"{url}/v1/signed/{token}", json={})
            assert answer.status_code == 404, (verb, token, answer.text)
            assert answer.json()["error"]["message"] == "The resource could not be found."
