"""What the simulated cloud's software-configuration agent lets a tenant's script do on the host.

By default nothing: a ``script`` config's run is simulated (it succeeds, says so, and its
outputs come from its inputs), and a script that would write outside its folder writes nothing.
Executing is the starter's choice (``Options.agent_execute_scripts``, ``convergence simcloud
--execute-scripts``); then, the tests running as root as CI does, a script runs as ``nobody``
with no group of root's, in a new empty folder of its own that is gone afterwards, with an
environment that owes nothing to the cloud's, cannot write into a folder of root's, is killed at
its time limit and fails saying so, and sends back no more than the cap (nor a link to a file
it may not read). Servers are booted through unmodified openstacksdk; the fake orchestration
endpoint receives the signals, which are what the tests look at.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from convergence.ports.clock import ManualClock
from convergence_simcloud.agent_hooks import simulated_value
from convergence_simcloud.client import SimControl
from convergence_simcloud.serve import running
from convergence_simcloud.state import Options, SimCloud
from tests.simcloud.agent_fakes import Orchestration, deployment, orchestration, user_data
from tests.simcloud.conftest import connect
from tests.simcloud.test_agent import wait_for
from tests.simcloud.test_servers import cirros, private_network

LIMIT = 4096  # the executing cloud's cap on what a script sends back, bytes
MARKER = "SIMCLOUD_TEST_SECRET_MARKER"  # in the cloud's environment, never in a script's
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the confinement of a cloud run as root")


@dataclass
class Place:
    """A cloud with its agent, a connection, a network and the fake orchestration endpoint."""

    cloud: SimCloud
    control: SimControl
    conn: Any
    net: Any
    engine: Orchestration

    def deployment(self, name: str, script: str, outputs: tuple[str, ...] = (),
                   inputs: dict[str, Any] | None = None) -> dict[str, Any]:
        """A script deployment signalling to its own name."""
        return deployment(f"id-{uuid.uuid4().hex[:8]}", name, script, inputs=inputs,
                          outputs=outputs, signal=self.engine.signal_url(name))

    def apply(self, server: str, *deployments: dict[str, Any]) -> list[dict[str, Any]]:
        """Boot a server whose agent applies ``deployments``: the bodies of their signals."""
        token = uuid.uuid4().hex
        self.engine.set(token, list(deployments))
        self.conn.compute.create_server(
            name=server, flavor_id="1", image_id=cirros(self.conn),
            networks=[{"uuid": self.net.id}],
            user_data=user_data(self.engine.metadata_url(token)))
        bodies = []
        for made in deployments:
            [signal] = wait_for(lambda name=made["name"]: self.engine.signals_of(name),
                                timeout=30)
            bodies.append(signal.body)
        return bodies


@contextmanager
def place(**options: Any) -> Iterator[Place]:
    with orchestration() as engine:
        cloud = SimCloud(options=Options(build_seconds=0, agent_poll_interval=0.05,
                                         **options), clock=ManualClock(time.time()))
        with running(cloud) as url:
            conn = connect(url)
            yield Place(cloud, SimControl(url), conn, private_network(conn), engine)


@pytest.fixture
def root_folder() -> Iterator[Path]:
    """A folder of root's (0755) in the system's temporary folder: any account may pass
    through it, only root may write in it."""
    made = Path(tempfile.mkdtemp(prefix="simcloud-safety-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


# -- by default: simulated -------------------------------------------------------------------

def test_by_default_a_script_writes_nothing_and_its_run_is_simulated(
        root_folder: Path) -> None:
    target = root_folder / "written-by-a-tenant"
    script = f"#!/bin/sh\nid > {target}\nprintf done > \"$heat_outputs_path.result\"\n"
    given = {"port": 8080, "upstream": "db"}
    with place() as sim:
        assert sim.control.agent_settings().execute_scripts is False
        first, again, changed = sim.apply(
            "simulated-1", sim.deployment("outside", script, ("port", "result"), given),
            sim.deployment("outside-again", script, ("result",), given),
            sim.deployment("outside-changed", script, ("result",),
                           {**given, "upstream": "db2"}))
        runs = wait_for(lambda: len(sim.control.agent_runs(server="simulated-1")) == 3 and
                        sim.control.agent_runs(server="simulated-1"))  # logged once signalled
        refused = httpx.put(sim.control.url + "/agent", json={"execute_scripts": True})
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith(
            "execute_scripts: only whoever starts the cloud sets it")
        assert sim.control.agent_settings().execute_scripts is False
    assert not target.exists()  # nothing ran
    assert first["deploy_status_code"] == 0
    assert first["deploy_stdout"] == "simulated run of outside: the script was not executed\n"
    assert "was simulated" in first["deploy_stderr"]
    assert "--execute-scripts" in first["deploy_stderr"]
    # An output named as an input is that input; another is derived from the name and inputs.
    assert first["port"] == 8080
    assert first["result"] == simulated_value("outside", "result", given)
    assert first["result"].startswith("outside.result:") and first["result"] != "done"
    assert again["result"] == simulated_value("outside-again", "result", given)
    assert changed["result"] == simulated_value("outside-changed", "result",
                                                {**given, "upstream": "db2"})
    assert [(r.name, r.group, r.status_code, r.signalled) for r in runs] == [
        ("outside", "script", 0, True), ("outside-again", "script", 0, True),
        ("outside-changed", "script", 0, True)]


def test_simulated_values_follow_the_inputs_and_ignore_the_deploy_ones() -> None:
    base = simulated_value("20_api", "endpoint", {"version": "17.1"})
    assert base == simulated_value("20_api", "endpoint", {
        "version": "17.1", "deploy_server_id": "s-1", "deploy_action": "UPDATE"})
    assert base != simulated_value("20_api", "endpoint", {"version": "18.0"})
    assert base != simulated_value("20_api", "state", {"version": "17.1"})
    assert base != simulated_value("21_api", "endpoint", {"version": "17.1"})


# -- executed, when the starter asks: confined -----------------------------------------------

@pytest.fixture(scope="module")
def executing() -> Iterator[Place]:
    os.environ[MARKER] = "the cloud's own"
    try:
        with place(agent_execute_scripts=True, agent_output_limit=LIMIT) as sim:
            yield sim
    finally:
        del os.environ[MARKER]


CONFINED = """#!/bin/sh
out="$heat_outputs_path"
id -u > "$out.uid"
id -G > "$out.groups"
pwd > "$out.where"
ls -A | wc -l | tr -d ' ' > "$out.entries"
printf '%s' "$HOME" > "$out.home"
env > "$out.environment"
if touch "$target/intruder" 2>/dev/null; then echo yes; else echo no; fi > "$out.wrote"
touch left-behind
"""
CONFINED_OUTPUTS = ("uid", "groups", "where", "entries", "home", "environment", "wrote")


@as_root
def test_an_executed_script_runs_as_nobody_in_a_fresh_empty_folder_of_its_own(
        executing: Place, root_folder: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    first, second = executing.apply(
        "confined-1",
        executing.deployment("confined", CONFINED, CONFINED_OUTPUTS,
                             {"target": str(root_folder)}),
        executing.deployment("confined-again", CONFINED, CONFINED_OUTPUTS,
                             {"target": str(root_folder)}))
    for body in (first, second):
        assert body["deploy_status_code"] == 0, body["deploy_stderr"]
        assert body["uid"] == str(nobody.pw_uid) != "0"
        assert "0" not in body["groups"].split()
        assert body["wrote"] == "no"  # a folder of root's
        assert body["entries"] == "0"  # nothing in its folder when it starts
        assert body["home"] == body["where"]
        assert not Path(body["where"]).exists()  # removed afterwards
        environment = dict(line.split("=", 1) for line in body["environment"].splitlines()
                           if "=" in line)
        assert MARKER not in environment and environment["target"] == str(root_folder)
        assert environment["USER"] == "nobody"
    assert first["where"] != second["where"]  # a new folder each time
    assert list(root_folder.iterdir()) == []


@as_root
def test_a_script_past_its_time_limit_is_killed_and_fails_saying_so(
        executing: Place) -> None:
    executing.control.set_agent(script_timeout=1)
    try:
        [body] = executing.apply("sleepy-1", executing.deployment(
            "sleepy", "#!/bin/sh\necho \"started as $(id -u)\"\nsleep 60 &\nsleep 60\n"))
    finally:
        executing.control.set_agent(script_timeout=600)
    assert body["deploy_status_code"] == -1
    assert body["deploy_stdout"] == f"started as {pwd.getpwnam('nobody').pw_uid}\n"
    assert "timed out after 1 seconds and was killed" in body["deploy_stderr"]
    [run] = wait_for(lambda: executing.control.agent_runs(server="sleepy-1"))
    assert run.status_code == -1


@as_root
def test_what_a_script_sends_back_is_capped_and_links_are_refused(
        executing: Place, root_folder: Path) -> None:
    secret = root_folder / "secret"
    secret.write_text("root's only")
    secret.chmod(0o600)
    script = f"""#!/bin/sh
out="$heat_outputs_path"
head -c 10000 /dev/zero | tr '\\0' o
head -c 10000 /dev/zero | tr '\\0' e >&2
printf small > "$out.small"
head -c 10000 /dev/zero | tr '\\0' b > "$out.big"
ln -s {secret} "$out.secret"
"""
    [body] = executing.apply("chatty-1", executing.deployment(
        "chatty", script, ("small", "big", "secret")))
    assert body["deploy_status_code"] == 0
    stdout, stderr = body["deploy_stdout"], body["deploy_stderr"]
    assert stdout.startswith("o" * LIMIT) and "o" * (LIMIT + 1) not in stdout
    assert f"stdout cut at {LIMIT} bytes: {10000 - LIMIT} more bytes dropped" in stdout
    assert stderr.startswith("e" * LIMIT) and "e" * (LIMIT + 1) not in stderr
    assert body["small"] == "small"
    assert "big" not in body and "secret" not in body
    assert "output big refused" in stderr
    assert "output secret refused: a symbolic link" in stderr
    assert "root's only" not in repr(body)


@as_root
def test_the_command_executes_scripts_only_when_told_and_never_as_root(
        tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "convergence", "simcloud", "--port", "1", "--execute-scripts",
         "--script-user", "root"], capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert "scripts never run as root" in refused.stderr and refused.stdout == ""
