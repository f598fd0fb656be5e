"""The other software configuration types on the embedded tier: cloud-config and multipart
configs, a deployment moved to another server, one whose actions leave updates out, one that
runs on DELETE, and a structured deployment group's attributes by server."""

from __future__ import annotations

import email

from convergence.services import software

from .harness import TENANT, Story, hot
from .test_software import agent, inputs_of, pending, run_until, srv


def test_cloud_config_and_multipart_configs(story: Story) -> None:
    story.create(hot("""
    cc:
      type: OS::Heat::CloudConfig
      properties: {cloud_config: {packages: [nginx], runcmd: [[touch, /ok]]}}
    script:
      type: OS::Heat::SoftwareConfig
      properties: {config: "#!/bin/sh\\necho hi"}
    mime:
      type: OS::Heat::MultipartMime
      properties:
        parts:
        - config: {get_resource: cc}
        - config: {get_resource: script}
          filename: hi.sh
        - config: plain words
          subtype: plain
    """))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    current = story.current()
    cc = current["cc"].attributes["config"]
    assert cc.startswith("#cloud-config\n") and "nginx" in cc
    message = email.message_from_string(current["mime"].attributes["config"])
    parts = [p for p in message.get_payload() if isinstance(p, email.message.Message)]
    assert [p.get_content_type() for p in parts] == [
        "text/cloud-config", "text/x-shellscript", "text/plain"]
    assert parts[1].get_filename() == "hi.sh"
    assert "echo hi" in str(parts[1].get_payload(decode=True), "utf-8")
    # configs are immutable: a changed one is a new config, the old one gone
    first = current["script"].physical_id
    story.update(hot("""
    script:
      type: OS::Heat::SoftwareConfig
      properties: {config: "#!/bin/sh\\necho bye"}
    """))
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert story.current()["script"].physical_id != first
    ids = {c.id for c in software.list_configs(story.rt, TENANT)}
    assert first not in ids and story.current()["script"].physical_id in ids


DEPLOY = """
d:
  type: OS::Heat::SoftwareDeployment
  properties:
    server: SERVER
    actions: ACTIONS
    input_values: {v: VALUE}
"""


def deploy(story: Story, server: int, value: str, actions: str = "[CREATE, UPDATE]") -> str:
    return hot(DEPLOY.replace("SERVER", srv(story, server)).replace("VALUE", value)
               .replace("ACTIONS", actions))


def test_a_deployment_moves_to_its_new_server(story: Story) -> None:
    rt = story.rt
    story.create(deploy(story, 1, "a"))
    run_until(rt, lambda: bool(pending(rt, srv(story, 1))))
    agent(rt, srv(story, 1))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    story.update(deploy(story, 2, "a"))
    run_until(rt, lambda: bool(pending(rt, srv(story, 2))))
    (item,) = pending(rt, srv(story, 2))
    assert inputs_of(item)["deploy_action"] == "UPDATE"
    assert inputs_of(item)["deploy_server_id"] == srv(story, 2)
    assert software.server_metadata(rt, TENANT, srv(story, 1)) == []
    agent(rt, srv(story, 2))
    assert story.finish().stack_status == "UPDATE_COMPLETE"


def test_actions_say_which_changes_are_applied(story: Story) -> None:
    rt = story.rt
    story.create(deploy(story, 1, "a", "[CREATE, DELETE]"))
    run_until(rt, lambda: bool(pending(rt, srv(story, 1))))
    agent(rt, srv(story, 1))
    assert story.finish().stack_status == "CREATE_COMPLETE"
    before = software.server_metadata(rt, TENANT, srv(story, 1))
    story.update(deploy(story, 1, "b", "[CREATE, DELETE]"))  # no UPDATE: not applied
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert software.server_metadata(rt, TENANT, srv(story, 1)) == before
    story.delete()  # DELETE is: the agent runs it before the deployment goes
    run_until(rt, lambda: bool(pending(rt, srv(story, 1))))
    (item,) = pending(rt, srv(story, 1))
    assert inputs_of(item)["deploy_action"] == "DELETE"
    assert story.stack().status == "IN_PROGRESS"
    agent(rt, srv(story, 1))
    assert story.finish().stack_status == "DELETE_COMPLETE"
    assert software.list_deployments(rt, TENANT, srv(story, 1)) == []


GROUP = """
heat_template_version: 2018-08-31
outputs:
  codes: {value: {get_attr: [group, deploy_status_codes]}}
  roles: {value: {get_attr: [group, role]}}
resources:
  cfg:
    type: OS::Heat::StructuredConfig
    properties:
      group: salt
      config: {role: {get_input: role}}
      outputs: [{name: role}]
  group:
    type: OS::Heat::StructuredDeploymentGroup
    properties:
      config: {get_resource: cfg}
      servers: {left: LEFT, right: RIGHT}
      input_values: {role: web}
"""


def test_a_structured_deployment_group_deploys_to_each_server(story: Story) -> None:
    rt = story.rt
    story.create(GROUP.replace("LEFT", srv(story, 1)).replace("RIGHT", srv(story, 2)))
    for server in (srv(story, 1), srv(story, 2)):
        run_until(rt, lambda server=server: bool(pending(rt, server)))
        (item,) = pending(rt, server)
        assert item["config"] == {"role": "web"}
        agent(rt, server, lambda _name, values: {"role": values["role"]})
    done = story.finish()
    assert done.stack_status == "CREATE_COMPLETE", done.status_reason
    assert done.outputs["codes"]["value"] == {"left": 0, "right": 0}
    assert done.outputs["roles"]["value"] == {"left": "web", "right": "web"}
