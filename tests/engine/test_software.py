"""Software deployments and wait conditions on the embedded tier, under every adversity.

The test plays the agent on the servers: it reads a server's deployments as an agent polls
them (``software.server_metadata``) and reports through the deployment's signed URL, as
``convergence.api.signed`` does. A deployment holds nothing while its agent works (its node is
parked); its outputs feed other deployments' inputs; changing an input re-runs exactly the
deployments whose inputs changed; a non-zero status code fails it with the agent's stderr;
wait conditions count their handle's signals, fail on a FAILURE and time out.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from convergence.ports.clock import ManualClock
from convergence.ports.views import PARKED
from convergence.runtime import Runtime
from convergence.services import resource_signals, signals, software

from .harness import TENANT, Story, hot


def run_until(rt: Runtime, condition: Any, timeout: float = 60) -> None:
    """Run the work until ``condition`` holds (on real workers: wait for it)."""
    if rt.inprocess is not None:
        assert rt.inprocess.run(until=condition)
        return
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def inputs_of(item: dict[str, Any]) -> dict[str, Any]:
    return {i["name"]: i.get("value") for i in item["inputs"]}


def pending(rt: Runtime, server: str) -> list[dict[str, Any]]:
    """The server's deployments whose latest config waits on its agent."""
    waiting = {d.config_id for d in software.list_deployments(rt, TENANT, server)
               if d.status == "IN_PROGRESS"}
    return [c for c in software.server_metadata(rt, TENANT, server) if c["id"] in waiting]


def report(rt: Runtime, item: dict[str, Any], **details: Any) -> bool:
    """Report on a derived config through its signed URL, as the API's signed route."""
    url = inputs_of(item)["deploy_signal_id"]
    claims = signals.verify(signals.signing_key(rt), url.rsplit("/", 1)[1])
    assert claims is not None and claims["k"] == "deployment"
    return software.report(rt, claims["d"], details, tenant=claims["t"],
                           config_id=claims["c"])


def agent(rt: Runtime, server: str, outputs: Any = None, code: int = 0) -> list[str]:
    """Apply what is pending on ``server``: outputs computed from the inputs."""
    done = []
    for item in pending(rt, server):
        values = outputs(item["name"], inputs_of(item)) if outputs else {}
        assert report(rt, item, deploy_stdout=f"ran {item['name']}", deploy_stderr="oops"
                      if code else "", deploy_status_code=code, **values)
        done.append(item["name"])
    return done


CHAIN = hot("""
config:
  type: OS::Heat::SoftwareConfig
  properties:
    group: script
    config: "#!/bin/sh\\necho $version"
    inputs: [{name: version}, {name: upstream}]
    outputs: [{name: result}]
db:
  type: OS::Heat::SoftwareDeployment
  properties:
    name: 10_db
    config: {get_resource: config}
    server: srv-1
    input_values: {version: {get_param: version}, upstream: none}
api:
  type: OS::Heat::SoftwareDeployment
  properties:
    name: 20_api
    config: {get_resource: config}
    server: srv-1
    input_values: {version: "1", upstream: {get_attr: [db, result]}}
other:
  type: OS::Heat::SoftwareDeployment
  properties:
    name: 30_other
    config: {get_resource: config}
    server: srv-2
    input_values: {version: "1", upstream: fixed}
""").replace("resources:", "parameters:\n  version: {type: string, default: '1'}\n"
             "resources:", 1)


def chain(story: Story) -> str:
    """CHAIN with servers of this story's own (the distributed tier shares one database)."""
    return CHAIN.replace("srv-", f"{story.name}-srv-")


def srv(story: Story, n: int) -> str:
    return f"{story.name}-srv-{n}"


def result(name: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"result": f"{name}:{values['version']}:{values['upstream']}"}


def created(story: Story) -> None:
    """CHAIN created, its agents answering each deployment as it comes."""
    rt = story.rt
    story.create(chain(story))
    for _ in range(3):
        run_until(rt, lambda: bool(pending(rt, srv(story, 1)) or pending(rt, srv(story, 2)))
                  or story.stack().status != "IN_PROGRESS")
        agent(rt, srv(story, 1), result)
        agent(rt, srv(story, 2), result)
    assert story.finish().stack_status == "CREATE_COMPLETE"


def test_deployments_park_until_reported_and_chain_outputs_to_inputs(story: Story) -> None:
    rt = story.rt
    story.create(chain(story))
    run_until(rt, lambda: len(pending(rt, srv(story, 1))) == 1
              and len(pending(rt, srv(story, 2))) == 1)
    db = story.current()["db"]
    assert db.status == "IN_PROGRESS" and db.lease_owner is None
    nodes = [e for e in story.events() if e.resource_name == "db"]
    assert [(e.action, e.status) for e in nodes] == [("CREATE", "IN_PROGRESS")]
    item = pending(rt, srv(story, 1))[0]
    given = inputs_of(item)
    assert item["name"] == "10_db" and item["group"] == "script"
    assert given["version"] == "1" and given["deploy_action"] == "CREATE"
    assert given["deploy_server_id"] == srv(story, 1) and given["deploy_resource_name"] == "db"
    assert given["deploy_signal_transport"] == "CFN_SIGNAL"
    assert given["deploy_signal_id"].startswith(rt.settings.public_url + "/v1/signed/")
    assert agent(rt, srv(story, 1), result) == ["10_db"]
    # api reads db's output: it is deployed only now, with the output as its input
    run_until(rt, lambda: len(pending(rt, srv(story, 1))) == 1)
    item = pending(rt, srv(story, 1))[0]
    assert item["name"] == "20_api" and inputs_of(item)["upstream"] == "10_db:1:none"
    assert agent(rt, srv(story, 1), result) == ["20_api"]
    assert agent(rt, srv(story, 2), result) == ["30_other"]
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    api = story.current()["api"]
    assert api.attributes["result"] == "20_api:1:10_db:1:none"
    assert api.attributes["deploy_stdout"] == "ran 20_api"
    assert api.attributes["deploy_status_code"] == 0
    # the metadata lists a server's configs in name order
    assert [c["name"] for c in software.server_metadata(rt, TENANT, srv(story, 1))] == \
        ["10_db", "20_api"]
    signalled = [e for e in story.events() if e.action == "SIGNAL"]
    assert {e.resource_name for e in signalled} == {"db", "api", "other"}


def test_a_changed_input_reruns_exactly_the_deployments_that_depend_on_it(
        story: Story) -> None:
    rt = story.rt
    created(story)
    before = {c["name"]: c["id"] for c in software.server_metadata(rt, TENANT, srv(story, 1))}
    story.update(chain(story), parameters={"version": "2"})
    run_until(rt, lambda: len(pending(rt, srv(story, 1))) == 1)
    assert [c["name"] for c in pending(rt, srv(story, 1))] == ["10_db"]
    assert agent(rt, srv(story, 1), result) == ["10_db"]
    run_until(rt, lambda: len(pending(rt, srv(story, 1))) == 1)
    assert inputs_of(pending(rt, srv(story, 1))[0])["upstream"] == "10_db:2:none"
    assert agent(rt, srv(story, 1), result) == ["20_api"]
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    after = {c["name"]: c["id"] for c in software.server_metadata(rt, TENANT, srv(story, 1))}
    assert after["10_db"] != before["10_db"] and after["20_api"] != before["20_api"]
    updated = {e.resource_name for e in story.events() if e.action == "UPDATE"}
    assert "other" not in updated and {"db", "api"} <= updated
    assert pending(rt, srv(story, 2)) == []


def test_a_non_zero_status_code_fails_the_deployment_with_its_stderr(story: Story) -> None:
    rt = story.rt
    story.create(chain(story), disable_rollback=True)
    run_until(rt, lambda: len(pending(rt, srv(story, 1))) == 1
              and len(pending(rt, srv(story, 2))) == 1)
    agent(rt, srv(story, 1), code=3)
    agent(rt, srv(story, 2))
    done = story.finish()
    assert done.stack_status == "CREATE_FAILED"
    db = story.current()["db"]
    assert db.status == "FAILED"
    assert "Deployment exited with non-zero status code: 3" in db.status_reason
    assert "oops" in db.status_reason
    failed = [e for e in story.events() if e.resource_name == "db" and e.status == "FAILED"]
    assert failed and "oops" in failed[-1].reason


def test_a_late_report_on_a_replaced_run_changes_nothing(story: Story) -> None:
    rt = story.rt
    story.create(chain(story))
    run_until(rt, lambda: len(pending(rt, srv(story, 1))) == 1)
    first = pending(rt, srv(story, 1))[0]
    story.update(chain(story), parameters={"version": "3"})
    run_until(rt, lambda: bool(pending(rt, srv(story, 1)))
              and pending(rt, srv(story, 1))[0]["id"] != first["id"])
    assert not report(rt, first, deploy_status_code=0, result="stale")
    assert inputs_of(pending(rt, srv(story, 1))[0])["version"] == "3"


def test_no_signal_deployments_complete_without_waiting(story: Story) -> None:
    story.create(hot("""
    d:
      type: OS::Heat::SoftwareDeployment
      properties: {server: srv-9, signal_transport: NO_SIGNAL, input_values: {a: b}}
    """).replace("srv-9", srv(story, 9)))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    (dep,) = software.list_deployments(story.rt, TENANT, srv(story, 9))
    assert dep.status == "COMPLETE" and dep.input_values == {"a": "b"}


def test_structured_deployments_put_their_inputs_in_the_config(story: Story) -> None:
    rt = story.rt
    story.create(hot("""
    cfg:
      type: OS::Heat::StructuredConfig
      properties:
        group: puppet
        config: {port: {get_input: port}, nested: [{get_input: host}]}
    dep:
      type: OS::Heat::StructuredDeployment
      properties:
        config: {get_resource: cfg}
        server: srv-3
        input_values: {port: 8080, host: db.local}
    """).replace("srv-3", srv(story, 3)))
    run_until(rt, lambda: bool(pending(rt, srv(story, 3))))
    (item,) = pending(rt, srv(story, 3))
    assert item["config"] == {"port": 8080, "nested": ["db.local"]}
    assert item["group"] == "puppet"
    agent(rt, srv(story, 3))
    assert story.finish().stack_status == "CREATE_COMPLETE"


def test_deleting_deployments_forgets_them_and_their_configs(story: Story) -> None:
    rt = story.rt
    created(story)
    story.delete()
    assert story.finish().stack_status == "DELETE_COMPLETE"
    stack_id = story.stack().id
    assert [d for d in software.list_deployments(rt, TENANT) if d.stack_id == stack_id] == []
    assert [c for c in software.list_configs(rt, TENANT)
            if (c.owner or "").startswith(stack_id + "/")] == []


WAIT = hot("""
handle:
  type: OS::Heat::WaitConditionHandle
wait:
  type: OS::Heat::WaitCondition
  properties: {handle: {get_resource: handle}, count: 2, timeout: 600}
""")


def parked_nodes(story: Story) -> int:
    stack = story.stack()
    with story.rt.store.read() as tx:
        assert stack.traversal_id is not None
        return tx.node_states(stack.traversal_id).get(PARKED, 0)


def test_a_wait_condition_waits_for_count_signals_holding_nothing(story: Story) -> None:
    rt = story.rt
    story.create(WAIT)
    run_until(rt, lambda: parked_nodes(story) == 1)
    handle = story.current()["handle"]
    assert handle.attributes["curl_cli"].startswith("curl -i -X POST")
    assert handle.attributes["endpoint"].startswith(rt.settings.public_url + "/v1/signed/")
    assert json.loads(handle.attributes["signal"])["endpoint"] == handle.attributes["endpoint"]
    assert story.current()["wait"].lease_owner is None
    resource_signals.signal(rt, TENANT, story.stack().id, "handle",
                            {"status": "SUCCESS", "data": "first", "id": "a"})
    run_until(rt, lambda: parked_nodes(story) == 1)
    assert story.stack().status == "IN_PROGRESS"
    resource_signals.signal(rt, TENANT, story.stack().id, "handle", {"data": "second"})
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert json.loads(story.current()["wait"].attributes["data"]) == {"a": "first",
                                                                      "2": "second"}


def test_a_failure_signal_fails_the_wait_condition(story: Story) -> None:
    rt = story.rt
    story.create(WAIT, disable_rollback=True)
    run_until(rt, lambda: parked_nodes(story) == 1)
    resource_signals.signal(rt, TENANT, story.stack().id, "handle",
                            {"status": "FAILURE", "reason": "disk full"})
    done = story.finish()
    assert done.stack_status == "CREATE_FAILED"
    assert "WaitConditionFailure: disk full" in story.current()["wait"].status_reason


def test_a_wait_condition_times_out(story: Story) -> None:
    rt = story.rt
    story.create(WAIT, disable_rollback=True)
    run_until(rt, lambda: parked_nodes(story) == 1)
    resource_signals.signal(rt, TENANT, story.stack().id, "handle", {})
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    clock.advance(601)
    done = story.finish()
    assert done.stack_status == "CREATE_FAILED"
    assert "WaitConditionTimeout: 1 of 2 received" in story.current()["wait"].status_reason


def test_update_wait_condition_handles_are_renewed_by_every_update(story: Story) -> None:
    rt = story.rt
    text = hot("""
    handle:
      type: OS::Heat::UpdateWaitConditionHandle
    wait:
      type: OS::Heat::WaitCondition
      properties: {handle: {get_resource: handle}, timeout: 600}
    """)
    story.create(text)
    run_until(rt, lambda: parked_nodes(story) == 1)
    resource_signals.signal(rt, TENANT, story.stack().id, "handle", {})
    assert story.finish().stack_status == "CREATE_COMPLETE"
    first = story.current()["handle"].physical_id
    story.update(text)  # the same template: the handle is renewed all the same
    run_until(rt, lambda: story.current()["handle"].physical_id != first
              and parked_nodes(story) == 1)
    resource_signals.signal(rt, TENANT, story.stack().id, "handle", {})
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason


def test_two_clients_signalling_at_once_lose_no_signal(story: Story) -> None:
    rt = story.rt
    story.create(hot("""
    handle:
      type: OS::Heat::WaitConditionHandle
    wait:
      type: OS::Heat::WaitCondition
      properties: {handle: {get_resource: handle}, count: 12, timeout: 600}
    """))
    run_until(rt, lambda: story.current().get("wait") is not None
              and story.current()["wait"].status == "IN_PROGRESS")
    stack_id = story.stack().id
    errors: list[BaseException] = []

    def client(name: str) -> None:
        try:
            for i in range(6):  # no ids: numbered as they come, none overwritten
                resource_signals.signal(rt, TENANT, stack_id, "handle",
                                        {"data": f"{name}{i}"})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    data = json.loads(story.current()["wait"].attributes["data"])
    assert sorted(data) == sorted(str(i) for i in range(1, 13))
    assert sorted(data.values()) == sorted(f"{n}{i}" for n in "ab" for i in range(6))
