"""The software-configuration agent's life with its cloud: it stops with the in-process cloud
(a script under way killed, its scratch folder removed, no thread left), what it applied is
kept in the state file across a restart, and the ``convergence simcloud`` process serves it
with ``--agent-poll-interval`` and ``--no-agent``, simulating script runs unless told to
execute them. Apart from ``test_agent.py``, whose module-wide
cloud would otherwise still have agent threads of its own while these count theirs."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from convergence.ports.clock import ManualClock
from convergence_simcloud.client import SimControl
from convergence_simcloud.serve import running
from convergence_simcloud.state import Options, SimCloud
from tests.simcloud.agent_fakes import Orchestration, deployment, orchestration, user_data
from tests.simcloud.conftest import connect
from tests.simcloud.test_agent import wait_for
from tests.simcloud.test_process import simcloud_process
from tests.simcloud.test_servers import cirros, private_network


def agent_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("simcloud-agent")]


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder any account may write into, for what a script under test leaves behind (an
    executed script runs as ``nobody`` when the tests run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="simcloud-test-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def boot(url: str, engine: Orchestration, token: str, deployments: list[dict[str, Any]],
         name: str = "life-1") -> str:
    conn = connect(url)
    engine.set(token, deployments)
    net = private_network(conn)
    made = conn.compute.create_server(name=name, flavor_id="1", image_id=cirros(conn),
                                      networks=[{"uuid": net.id}],
                                      user_data=user_data(engine.metadata_url(token)))
    return str(made.id)


def test_the_agent_stops_with_the_cloud_killing_a_script_under_way() -> None:
    assert agent_threads() == []
    with shared_folder() as folder, orchestration() as engine:
        where, pid = folder / "where", folder / "sleep.pid"
        script = f"#!/bin/sh\npwd > {where}.tmp\nsleep 60 &\necho $! > {pid}\n" \
                 f"mv {where}.tmp {where}\nwait\n"
        cloud = SimCloud(options=Options(build_seconds=0, agent_poll_interval=0.05,
                                         agent_execute_scripts=True),
                         clock=ManualClock(time.time()))
        with running(cloud) as url:
            boot(url, engine, "long", [deployment("l-1", "long", script,
                                                  signal=engine.signal_url("long"))])
            wait_for(where.exists)
            assert agent_threads()
            sleeper = int(pid.read_text())
            assert alive(sleeper)
        assert agent_threads() == []
        assert not alive(sleeper)  # killed with the script's process group
        assert not Path(where.read_text().strip()).exists()  # the scratch folder is gone
        assert engine.signals_of("long") == []  # cut short by the shutdown: not reported
        with cloud.locked():
            assert cloud.tables["agent_runs"] == {}


def test_what_was_applied_is_kept_across_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "cloud.json"

    def start() -> SimCloud:
        return SimCloud(options=Options(build_seconds=0, agent_poll_interval=0.05,
                                        state_file=state), clock=ManualClock(time.time()))

    with orchestration() as engine:
        with running(start()) as url:
            server_id = boot(url, engine, "kept", [deployment(
                "k-1", "kept", "", "puppet", signal=engine.signal_url("kept"))])
            wait_for(lambda: SimControl(url).agent_runs())
        saved = json.loads(state.read_text())["tables"]
        assert saved["agent_servers"][server_id]["applied"] == ["k-1"]
        assert [r["deployment_id"] for r in saved["agent_runs"].values()] == ["k-1"]
        with running(start()) as url:
            polled = engine.polled("kept")
            wait_for(lambda: engine.polled("kept") >= polled + 3)
            assert [r.deployment_id for r in SimControl(url).agent_runs()] == ["k-1"]
        assert len(engine.signals_of("kept")) == 1


def test_the_simcloud_process_serves_the_agent_with_its_options(tmp_path: Path) -> None:
    with orchestration() as engine, simcloud_process(
            tmp_path, "--build-seconds", "0", "--no-agent",
            "--agent-poll-interval", "0.05") as entry:
        url = yaml.safe_load(entry)["clouds"]["simcloud"]["auth"]["auth_url"].removesuffix(
            "/v3")
        assert httpx.get(f"{url}/_sim/agent").json() == {
            "poll_interval": 0.05, "script_timeout": 600.0, "enabled": False,
            "execute_scripts": False}
        boot(url, engine, "proc", [deployment("p-1", "proc", "#!/bin/sh\necho in a process\n",
                                              signal=engine.signal_url("proc"))])
        time.sleep(0.3)
        assert engine.polled("proc") == 0
        SimControl(url).set_agent(enabled=True)
        [signal] = wait_for(lambda: engine.signals_of("proc"))
        # Not executed: the command runs scripts only with --execute-scripts.
        assert signal.body["deploy_stdout"] == "simulated run of proc: the script was not " \
            "executed\n"
        assert signal.body["deploy_status_code"] == 0
