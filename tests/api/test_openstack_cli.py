"""The unmodified ``openstack`` CLI (python-openstackclient + python-heatclient) against
``convergence api`` run as a real process, without Keystone.

The recipe is the Heat API reference's (section 2.4): ``--os-auth-type none --os-endpoint
http://HOST:PORT/v1/<tenant>``; heatclient then skips discovery and uses the endpoint as is.
The ``openstack`` executable is the one installed next to this interpreter (the dev extra).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api_process import running_api

OPENSTACK = Path(sys.executable).with_name("openstack")

TEMPLATE = """\
    heat_template_version: 2018-08-31
    parameters:
      value: {type: string, default: one}
    resources:
      first:
        type: OS::Heat::TestResource
        properties: {value: {get_param: value}}
      second:
        type: OS::Heat::TestResource
        depends_on: [first]
    outputs:
      copied: {value: {get_attr: [first, output]}}
    """


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with running_api(tmp_path, "osc.db") as url:
        yield url


class Openstack:
    """Runs ``openstack`` with the no-Keystone flags against one tenant of the server."""

    def __init__(self, server: str, tenant: str, cwd: Path) -> None:
        self.flags = ["--os-auth-type", "none", "--os-endpoint", f"{server}/v1/{tenant}"]
        self.cwd = cwd
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(OPENSTACK), *self.flags, *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=120)
        if check:
            assert done.returncode == 0, f"openstack {' '.join(args)}:\n{done.stderr}"
        return done

    def json(self, *args: str) -> Any:
        """The command's JSON answer (``--wait`` logs the events on stdout before it)."""
        text = self(*args, "-f", "json").stdout
        starts = [i for i, line in enumerate(text.splitlines()) if line[:1] in ("{", "[")]
        assert starts, text
        return json.loads("\n".join(text.splitlines()[starts[0]:]))


def test_openstack_stack_commands(server: str, tmp_path: Path) -> None:
    assert OPENSTACK.exists(), "pip install -e '.[dev]' installs python-openstackclient"
    (tmp_path / "t.yaml").write_text(textwrap.dedent(TEMPLATE))
    osc = Openstack(server, "tenant1", tmp_path)

    created = osc.json("stack", "create", "-t", "t.yaml", "--wait", "web")
    assert created["stack_name"] == "web"
    assert created["stack_status"] == "CREATE_COMPLETE"

    listed = osc.json("stack", "list")
    assert [(s["Stack Name"], s["Stack Status"]) for s in listed] == [("web",
                                                                        "CREATE_COMPLETE")]

    shown = osc.json("stack", "show", "web")
    assert shown["id"] == created["id"]
    assert shown["outputs"] == [{"output_key": "copied", "output_value": "one",
                                 "description": ""}]

    updated = osc.json("stack", "update", "--existing", "--parameter", "value=two", "--wait",
                       "web")
    assert updated["stack_status"] == "UPDATE_COMPLETE"

    resources = osc.json("stack", "resource", "list", "web")
    assert {r["resource_name"]: r["resource_status"] for r in resources} == \
        {"first": "UPDATE_COMPLETE", "second": "CREATE_COMPLETE"}

    events = osc.json("stack", "event", "list", "web")
    stack_level = [e["resource_status"] for e in events if e["resource_name"] == "web"]
    assert stack_level == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE",
                           "UPDATE_IN_PROGRESS", "UPDATE_COMPLETE"]
    log = osc("stack", "event", "list", "web").stdout
    assert "[web]: UPDATE_COMPLETE" in log

    output = osc.json("stack", "output", "show", "web", "copied")
    assert output == {"output_key": "copied", "output_value": "two", "description": ""}

    osc("stack", "delete", "--yes", "--wait", "web")  # exits 0 once the name is gone
    assert osc.json("stack", "list") == []
    missing = osc("stack", "show", "web", check=False)
    assert missing.returncode == 1
    assert "Stack not found: web" in missing.stderr


NODE = """\
    heat_template_version: 2018-08-31
    parameters:
      value: {type: string}
    resources:
      inner: {type: OS::Heat::TestResource, properties: {value: {get_param: value}}}
    outputs:
      copied: {value: {get_attr: [inner, output]}}
    """

TREE = """\
    heat_template_version: 2018-08-31
    resources:
      node: {type: node.yaml, properties: {value: hello}}
      group:
        type: OS::Heat::ResourceGroup
        properties:
          count: 2
          resource_def: {type: node.yaml, properties: {value: m%index%}}
    outputs:
      members: {value: {get_attr: [group, copied]}}
    """


def test_openstack_nested_stacks(server: str, tmp_path: Path) -> None:
    """heatclient sends the nested template from disk in ``files`` (keyed by its URL); the
    nested stacks show as Heat shows them: listed with ``--nested`` only, their resources
    with ``--nested-depth`` and their parent resource."""
    (tmp_path / "tree.yaml").write_text(textwrap.dedent(TREE))
    (tmp_path / "node.yaml").write_text(textwrap.dedent(NODE))
    osc = Openstack(server, "tenant1", tmp_path)
    created = osc.json("stack", "create", "-t", "tree.yaml", "--wait", "tree")
    assert created["stack_status"] == "CREATE_COMPLETE"
    assert osc.json("stack", "output", "show", "tree", "members")["output_value"] == \
        ["m0", "m1"]
    assert [s["Stack Name"] for s in osc.json("stack", "list")] == ["tree"]
    nested = osc.json("stack", "list", "--nested")
    assert len(nested) == 5  # tree, node, group and the group's two members
    assert sum(s["Stack Name"] == "tree" for s in nested) == 1
    listed = osc.json("stack", "resource", "list", "--nested-depth", "2", "tree")
    assert sorted((r["resource_name"], r.get("stack_name", "")) for r in listed
                  if r["resource_name"] in ("node", "group")) == [("group", "tree"),
                                                                 ("node", "tree")]
    assert sorted(r["resource_name"] for r in listed) == \
        ["0", "1", "group", "inner", "inner", "inner", "node"]
    osc("stack", "delete", "--yes", "--wait", "tree")
    assert osc.json("stack", "list", "--nested") == []


HOOK_ENV = """\
    resource_registry:
      resources:
        first:
          hooks: pre-create
    """


def test_openstack_stack_hooks(server: str, tmp_path: Path) -> None:
    """heatclient's hook commands: ``hook poll`` finds the paused resource through the
    events (Heat's reasons), ``hook clear`` sends the ``unset_hook`` signal."""
    import time

    (tmp_path / "t.yaml").write_text(textwrap.dedent(TEMPLATE))
    (tmp_path / "hooks.yaml").write_text(textwrap.dedent(HOOK_ENV))
    osc = Openstack(server, "tenant1", tmp_path)
    osc("stack", "create", "-t", "t.yaml", "-e", "hooks.yaml", "hooked")
    deadline = time.monotonic() + 60
    while True:
        pending = osc.json("stack", "hook", "poll", "hooked")
        if pending:
            break
        assert time.monotonic() < deadline, "the hook never showed"
        time.sleep(0.2)
    assert [(p["Resource Name"], p["Resource Status Reason"]) for p in pending] == [
        ("first", "CREATE paused until Hook pre-create is cleared")]
    assert osc.json("stack", "show", "hooked")["stack_status"] == "CREATE_IN_PROGRESS"
    osc("stack", "hook", "clear", "hooked", "first")
    deadline = time.monotonic() + 60
    while osc.json("stack", "show", "hooked")["stack_status"] != "CREATE_COMPLETE":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    events = osc.json("stack", "event", "list", "hooked")
    assert any(e["resource_status_reason"] == "Hook pre-create is cleared" for e in events)


def test_openstack_software_configs_and_deployments(server: str, tmp_path: Path) -> None:
    """heatclient's ``software config`` and ``software deployment`` commands on the engine's
    software configuration API."""
    (tmp_path / "hello.sh").write_text("#!/bin/sh\necho hello\n")
    osc = Openstack(server, "tenant1", tmp_path)
    made = osc.json("software", "config", "create", "--config-file", "hello.sh",
                    "--group", "script", "hello")
    assert made["name"] == "hello" and made["group"] == "script"
    assert "echo hello" in made["config"]
    listed = osc.json("software", "config", "list")
    assert [c["id"] for c in listed] == [made["id"]]
    shown = osc.json("software", "config", "show", made["id"])
    assert shown["id"] == made["id"]
    deployed = osc.json("software", "deployment", "create", "--config", made["id"],
                        "--server", "server-1", "--input-value", "who=world",
                        "--signal-transport", "NO_SIGNAL", "hello-1")
    assert deployed["server_id"] == "server-1"
    assert [d["id"] for d in osc.json("software", "deployment", "list")] == [deployed["id"]]
    metadata = osc("software", "deployment", "metadata", "show", "server-1").stdout
    assert "who" in metadata and "world" in metadata
    osc("software", "deployment", "delete", deployed["id"])
    assert osc.json("software", "deployment", "list") == []
    osc("software", "config", "delete", made["id"])
    assert osc.json("software", "config", "list") == []
