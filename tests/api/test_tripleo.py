"""The TripleO example (``examples/tripleo``) as an operator drives it, against a real
``convergence api`` process whose servers' agents run in the simulated cloud. That cloud
simulates the script runs, as it does by default: each output is derived from its
deployment's name and inputs (``convergence_simcloud.agent_hooks.simulated_value``), so the
values still flow down the chain and change with the ``version``.

Created, then a new ``version``: exactly the chained deployments run again (the database's,
whose output feeds the API's, whose output feeds the computes'), nothing else is updated; the
compute role rolls in batches of two, each compute node paused on its ``pre-update`` hook
until the test clears it, node by node. What ran where and when is read from the simulated
cloud's agent run log: no compute node of a batch runs before its hook is cleared, and a
batch starts only once the batch before it is done (never more than one batch down).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from convergence_simcloud.agent_hooks import simulated_value
from convergence_simcloud.client import SimControl
from convergence_simcloud.seed import Seed, default_quota
from convergence_simcloud.serve import clouds_yaml
from convergence_simcloud.serve import running as serving
from convergence_simcloud.state import Options, SimCloud
from tests.api_process import api_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tripleo"
TENANT = "overcloud"


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    quota = {**default_quota(), "instances": 50, "cores": 500, "ram": 1_000_000}
    state = SimCloud(Seed(compute_quota=quota),
                     options=Options(build_seconds=0.2, agent_poll_interval=0.2))
    with serving(state) as url:
        path = tmp_path / "clouds.yaml"
        path.write_text(clouds_yaml(url))
        yield url, path


def body(**parameters: Any) -> dict[str, Any]:
    return {"stack_name": "overcloud", "template": (EXAMPLE / "overcloud.yaml").read_text(),
            "files": {"role_node.yaml": (EXAMPLE / "role_node.yaml").read_text()},
            "environment": (EXAMPLE / "hooks.yaml").read_text(),
            "parameters": parameters}


def settled(client: httpx.Client, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        stack = client.get("/stacks/overcloud").json()["stack"]
        if not stack["stack_status"].endswith("IN_PROGRESS"):
            return dict(stack)
        assert time.monotonic() < deadline, stack["stack_status"]
        time.sleep(0.2)


def outputs(stack: dict[str, Any]) -> dict[str, Any]:
    return {o["output_key"]: o["output_value"] for o in stack["outputs"]}


def chain(version: str, tuning: str = "balanced") -> dict[str, str]:
    """What the simulated runs give the chain: the database's connection feeds the API's
    endpoint, which feeds each compute's state."""
    database = simulated_value("10_database", "connection", {"version": version})
    api = simulated_value("20_api", "endpoint",
                          {"version": version, "database_connection": database})
    state = simulated_value("30_compute", "state",
                            {"version": version, "api_endpoint": api, "tuning": tuning})
    return {"database_connection": database, "api_endpoint": api, "state": state}


def paused(client: httpx.Client) -> dict[str, str]:
    """The compute deployments paused on their hook: member name -> its nested stack."""
    listed = client.get("/stacks/overcloud/resources", params={"nested_depth": 2}).json()
    out = {}
    for r in listed["resources"]:
        if "paused until Hook pre-update" in (r.get("resource_status_reason") or ""):
            stack_link = next(link["href"] for link in r["links"] if link["rel"] == "stack")
            out[r["resource_name"]] = stack_link
    return out


def test_a_version_upgrade_rolls_through_compute_node_by_node(
        cloud: tuple[str, Path], tmp_path: Path) -> None:
    cloud_url, clouds = cloud
    control = SimControl(cloud_url)
    env = {"OS_CLOUD": "simcloud", "OS_CLIENT_CONFIG_FILE": str(clouds)}
    with api_process(tmp_path, "tripleo.db", env) as (_, url, _log), \
            httpx.Client(base_url=f"{url}/v1/{TENANT}", timeout=30,
                         follow_redirects=True) as client:
        made = client.post("/stacks", json=body())
        assert made.status_code == 201, made.text
        stack = settled(client)
        assert stack["stack_status"] == "CREATE_COMPLETE", stack["stack_status_reason"]
        out, expected = outputs(stack), chain("17.1")
        assert out["database_connection"] == expected["database_connection"]
        assert out["api_endpoint"] == expected["api_endpoint"]
        assert set(out["compute_states"]) == {f"compute-{i}" for i in range(4)}
        assert all(v == expected["state"] for v in out["compute_states"].values())
        created = control.agent_runs()
        assert sorted(r.name for r in created) == ["10_database", "20_api"] + \
            ["30_compute"] * 4
        mark = created[-1].seq
        first_event = client.get("/stacks/overcloud/events",
                                 params={"sort_dir": "desc", "limit": 1}).json()["events"]

        # the upgrade: the chain runs again, the computes two at a time, each after its hook
        changed = client.patch(f"/stacks/overcloud/{stack['id']}",
                               json={"parameters": {"version": "18.0"}})
        assert changed.status_code == 202, changed.text
        cleared: dict[str, float] = {}
        most_paused = 0
        deadline = time.monotonic() + 120
        while client.get("/stacks/overcloud").json()["stack"]["stack_status"] == \
                "UPDATE_IN_PROGRESS":
            assert time.monotonic() < deadline
            waiting = {n: s for n, s in paused(client).items() if n not in cleared}
            most_paused = max(most_paused, len(waiting))
            for name, stack_url in sorted(waiting.items())[:1]:  # one node at a time
                nested = stack_url.split("/stacks/", 1)[1]
                time.sleep(0.3)  # the operator moves the node's workloads away
                signal = client.post(f"/stacks/{nested}/resources/{name}/signal",
                                     json={"unset_hook": "pre-update"})
                assert signal.status_code == 200, signal.text
                cleared[name] = time.time()
            time.sleep(0.1)
        stack = settled(client)
        assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
        assert set(cleared) == {f"compute-{i}" for i in range(4)}
        assert most_paused <= 2  # a batch at a time
        out, expected = outputs(stack), chain("18.0")
        assert out["database_connection"] == expected["database_connection"]
        assert all(v == expected["state"] for v in out["compute_states"].values())

        runs = control.agent_runs(since=mark)
        assert [r.name for r in runs[:2]] == ["10_database", "20_api"]
        computes = [r for r in runs if r.name == "30_compute"]
        assert len(computes) == 4
        servers = client.get("/stacks/overcloud/outputs/compute_states").json()
        del servers
        by_server = {r.server_name: r for r in computes}
        assert len(by_server) == 4
        # each compute ran only after its hook was cleared ...
        names = sorted(cleared, key=cleared.__getitem__)
        starts = sorted(computes, key=lambda r: r.started_at)
        for run, name in zip(starts, names, strict=True):
            assert run.started_at >= cleared[name] - 0.05
        # ... and the second batch only once the first was done
        first, second = starts[:2], starts[2:]
        assert min(r.started_at for r in second) >= max(r.finished_at for r in first)

        # nothing but the deployments was updated
        events = client.get("/stacks/overcloud/events",
                            params={"marker": first_event[0]["id"], "limit": 1000,
                                    "nested_depth": 3}).json()["events"]
        updated = {e["resource_name"] for e in events
                   if e["resource_status"] == "UPDATE_IN_PROGRESS"}
        assert not updated & {"ctlplane", "ctlplane_subnet", "controllers", "computes",
                              "server"}

        # a setting only the compute config reads re-runs only the compute deployments
        mark = runs[-1].seq
        changed = client.patch(f"/stacks/overcloud/{stack['id']}",
                               json={"parameters": {"compute_tuning": "dense"}})
        assert changed.status_code == 202
        deadline = time.monotonic() + 120
        while client.get("/stacks/overcloud").json()["stack"]["stack_status"] == \
                "UPDATE_IN_PROGRESS":
            assert time.monotonic() < deadline
            for name, stack_url in paused(client).items():
                nested = stack_url.split("/stacks/", 1)[1]
                client.post(f"/stacks/{nested}/resources/{name}/signal",
                            json={"unset_hook": "pre-update"})
            time.sleep(0.2)
        stack = settled(client)
        assert stack["stack_status"] == "UPDATE_COMPLETE", stack["stack_status_reason"]
        assert sorted(r.name for r in control.agent_runs(since=mark)) == ["30_compute"] * 4
