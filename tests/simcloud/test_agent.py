"""The simulated cloud's software-configuration agent, end to end: servers booted through
unmodified openstacksdk with an ``os-collect-config.json`` part in their user_data poll a fake
orchestration endpoint (a real HTTP server), run script configs for real (the cloud is started
to execute them: ``test_agent_safety.py`` has the default, simulated runs, and the confinement),
and signal the results back; the run log, the settings and the faults are read and set through
``/_sim/agent``. One cloud (a 0.1 s poll interval) serves the whole module; each test has
servers and tokens of its own, and the faults and settings are reset after each."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from convergence.ports.clock import ManualClock
from convergence_simcloud.agent_config import AgentConfig, agent_config
from convergence_simcloud.client import ControlError, SimControl
from convergence_simcloud.serve import running
from convergence_simcloud.state import Options, SimCloud
from tests.simcloud.agent_fakes import Orchestration, deployment, orchestration, user_data
from tests.simcloud.conftest import connect
from tests.simcloud.test_servers import cirros, private_network

POLL = 0.1


@dataclass
class Sim:
    """The module's cloud, its control plane, a connection and a network, and the fake
    orchestration endpoint."""

    cloud: SimCloud
    control: SimControl
    conn: Any
    net: Any
    image: str
    engine: Orchestration
    made: list[str] = field(default_factory=list)  # the servers the test made

    def boot(self, name: str, deployments: list[dict[str, Any]] | None = None,
             **user_data_options: Any) -> tuple[str, str]:
        """A server whose agent polls a token of its own (with ``deployments``): its id and
        the token."""
        token = uuid.uuid4().hex
        self.engine.set(token, deployments or [])
        made = self.conn.compute.create_server(
            name=name, flavor_id="1", image_id=self.image, networks=[{"uuid": self.net.id}],
            user_data=user_data(self.engine.metadata_url(token), **user_data_options))
        self.made.append(str(made.id))
        return str(made.id), token

    def runs(self, server: str) -> list[Any]:
        return self.control.agent_runs(server=server)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def shared() -> Iterator[Sim]:
    with orchestration() as engine:
        cloud = SimCloud(options=Options(build_seconds=0, agent_poll_interval=POLL,
                                         agent_execute_scripts=True),
                         clock=ManualClock(time.time()))
        with running(cloud) as url:
            conn = connect(url)
            yield Sim(cloud, SimControl(url), conn, private_network(conn), cirros(conn),
                      engine)


@pytest.fixture
def sim(shared: Sim) -> Iterator[Sim]:
    yield shared
    for server_id in shared.made:  # a project may have 10 servers
        shared.conn.compute.delete_server(server_id, ignore_missing=True)
    shared.made.clear()
    for fault in shared.control.agent_faults():
        shared.control.remove_agent_fault(fault.id)
    shared.control.clear_rules()
    shared.control.set_agent(poll_interval=POLL, script_timeout=600, enabled=True)


SCRIPT = """#!/bin/sh
echo "hello $who"
echo "careful" >&2
printf 'web-%s\\n' "$who" > "${heat_outputs_path}.greeting"
printf '%s' "$count" > "${heat_outputs_path}.count"
printf '%s' "$mapping" > "${heat_outputs_path}.mapping"
pwd > "${heat_outputs_path}.where"
"""


def test_a_script_really_runs_and_its_signal_carries_output_and_status(sim: Sim) -> None:
    engine = sim.engine
    first = deployment("d-1", "configure", SCRIPT, inputs={
        "who": "world", "count": 3, "mapping": {"a": [1, 2]}},
        outputs=("greeting", "count", "mapping", "where", "absent"),
        signal=engine.signal_url("configure"), verb="PUT", action="CREATE")
    second = deployment("d-2", "fails", "#!/bin/sh\necho half\necho broken >&2\nexit 3\n",
                        signal=engine.signal_url("fails"), transport="CFN_SIGNAL")
    server_id, _ = sim.boot("script-1", [first, second])
    [put] = wait_for(lambda: engine.signals_of("configure"))
    assert (put.verb, put.content_type) == ("PUT", "application/json")
    body = put.body
    assert (body["deploy_stdout"], body["deploy_stderr"], body["deploy_status_code"]) == (
        "hello world\n", "careful\n", 0)
    assert (body["greeting"], body["count"]) == ("web-world", "3")
    assert body["mapping"] == '{"a": [1, 2]}'  # a non-string input reaches the script as JSON
    assert "absent" not in body
    assert not Path(body["where"]).exists()  # its scratch folder is gone
    [post] = wait_for(lambda: engine.signals_of("fails"))
    assert post.verb == "POST"  # the default verb
    assert (post.body["deploy_stdout"], post.body["deploy_stderr"],
            post.body["deploy_status_code"]) == ("half\n", "broken\n", 3)
    runs = wait_for(lambda: len(sim.runs(server_id)) == 2 and sim.runs(server_id))
    assert [(r.deployment_id, r.name, r.group, r.action, r.status_code, r.signalled)
            for r in runs] == [("d-1", "configure", "script", "CREATE", 0, True),
                               ("d-2", "fails", "script", "CREATE", 3, True)]
    assert runs[0].server_id == server_id and runs[0].server_name == "script-1"
    assert runs[0].seq < runs[1].seq and runs[0].finished_at <= runs[1].started_at
    assert sim.runs("script-1") == runs  # by name too
    [watched] = [s for s in sim.control.agent_servers() if s.server_id == server_id]
    assert watched.applied == ["d-1", "d-2"]


def test_other_groups_succeed_and_echo_their_inputs(sim: Sim) -> None:
    engine = sim.engine
    listed = [deployment("a-1", "ansible-conf", "- hosts: all", "ansible",
                         inputs={"port": 8080, "tags": ["a", "b"], "unused": "x"},
                         outputs=("port", "tags", "result"),
                         signal=engine.signal_url("ansible-conf")),
              deployment("u-1", "plain", {"any": "thing"}, "Heat::Ungrouped",
                         inputs={"foo": "bar"}, outputs=("foo",),
                         signal=engine.signal_url("plain"))]
    server_id, _ = sim.boot("groups-1", listed)
    [ansible] = wait_for(lambda: engine.signals_of("ansible-conf"))
    assert ansible.body == {"port": 8080, "tags": ["a", "b"], "deploy_stdout": "",
                            "deploy_stderr": "", "deploy_status_code": 0}
    [plain] = wait_for(lambda: engine.signals_of("plain"))
    assert plain.body["foo"] == "bar" and plain.body["deploy_status_code"] == 0
    runs = wait_for(lambda: len(sim.runs(server_id)) == 2 and sim.runs(server_id))
    assert [r.group for r in runs] == ["ansible", "Heat::Ungrouped"]  # logged once signalled


def test_an_applied_id_is_not_run_again_and_a_new_id_is(sim: Sim) -> None:
    engine = sim.engine
    signal = engine.signal_url("once")
    server_id, token = sim.boot("rerun-1", [deployment("r-1", "once", "#!/bin/sh\necho 1\n",
                                                        signal=signal)])
    wait_for(lambda: engine.signals_of("once"))
    polled = engine.polled(token)
    wait_for(lambda: engine.polled(token) >= polled + 3)
    assert len(engine.signals_of("once")) == 1 and len(sim.runs(server_id)) == 1
    engine.set(token, [deployment("r-2", "once", "#!/bin/sh\necho 2\n", signal=signal,
                                  action="UPDATE")])
    wait_for(lambda: len(sim.runs(server_id)) == 2)
    assert engine.signals_of("once")[1].body["deploy_stdout"] == "2\n"
    assert [(r.deployment_id, r.action) for r in sim.runs(server_id)] == [
        ("r-1", "CREATE"), ("r-2", "UPDATE")]


def test_no_signal_is_applied_but_not_signalled(sim: Sim) -> None:
    engine = sim.engine
    server_id, _ = sim.boot("quiet-1", [deployment(
        "q-1", "quiet", "#!/bin/sh\necho hi\n", transport="NO_SIGNAL",
        signal=engine.signal_url("quiet"))])
    [run] = wait_for(lambda: sim.runs(server_id))
    assert (run.status_code, run.signalled) == (0, False)
    [watched] = [s for s in sim.control.agent_servers() if s.server_id == server_id]
    assert watched.applied == ["q-1"]
    assert engine.signals_of("quiet") == []


def test_a_failing_signal_is_retried_then_the_deployment_applied_again(sim: Sim) -> None:
    engine = sim.engine
    with engine.lock:
        engine.answers["flaky"] = [500, 500]
        engine.answers["down"] = [503] * 6  # more than one application tries
        engine.answers["refused"] = [404]
    server_id, token = sim.boot("signals-1", [
        deployment("f-1", "flaky", "#!/bin/sh\necho flaky\n",
                   signal=engine.signal_url("flaky")),
        deployment("g-1", "down", "#!/bin/sh\necho down\n", signal=engine.signal_url("down")),
        deployment("h-1", "refused", "", "puppet", signal=engine.signal_url("refused"))])
    wait_for(lambda: len(engine.signals_of("flaky")) == 3)
    assert {s.body["deploy_stdout"] for s in engine.signals_of("flaky")} == {"flaky\n"}
    runs = wait_for(lambda: len(sim.runs(server_id)) == 4 and sim.runs(server_id))
    assert [(r.name, r.signalled) for r in runs] == [
        ("flaky", True), ("down", False), ("down", True), ("refused", False)]
    assert len(engine.signals_of("down")) == 7  # 4 tries, then 2 failed and 1 that arrived
    polled = engine.polled(token)
    wait_for(lambda: engine.polled(token) >= polled + 3)
    assert len(engine.signals_of("refused")) == 1  # a 4xx is final
    [watched] = [s for s in sim.control.agent_servers() if s.server_id == server_id]
    assert watched.applied == ["f-1", "g-1", "h-1"]


def test_a_metadata_poll_that_fails_is_tried_again(sim: Sim) -> None:
    engine = sim.engine
    server_id, token = sim.boot("metadata-1")
    with engine.lock:
        engine.metadata_status[token] = 503
    engine.set(token, [deployment("m-1", "later", "", "salt")])
    wait_for(lambda: engine.polled(token) >= 3)
    assert sim.runs(server_id) == []
    [watched] = [s for s in sim.control.agent_servers() if s.server_id == server_id]
    assert watched.last_poll == "503"
    with engine.lock:
        del engine.metadata_status[token]
    wait_for(lambda: sim.runs(server_id))


def test_faults_by_config_and_by_server_with_a_count(sim: Sim) -> None:
    engine = sim.engine
    forced = sim.control.add_agent_fault(config="fail-*", status_code=7, stderr="injected")
    sim.control.add_agent_fault(server="slow-*", delay=0.3, count=1)
    assert {f.id for f in sim.control.agent_faults()} >= {forced.id}
    script = "#!/bin/sh\necho ran\n"
    failing, failing_token = sim.boot("plain-1", [deployment("x-1", "fail-me", script,
                                                 signal=engine.signal_url("fail-me"))])
    [signal] = wait_for(lambda: engine.signals_of("fail-me"))
    assert (signal.body["deploy_status_code"], signal.body["deploy_stderr"],
            signal.body["deploy_stdout"]) == (7, "injected", "")  # the config did not run
    slow, token = sim.boot("slow-1", [deployment("y-1", "quick", script,
                                                 signal=engine.signal_url("quick"))])
    [run] = wait_for(lambda: sim.runs(slow))
    assert run.finished_at - run.started_at >= 0.3
    assert [f.id for f in sim.control.agent_faults()] == [forced.id]  # the counted one spent
    engine.set(token, [deployment("y-2", "quick", script, signal=engine.signal_url("quick"))])
    wait_for(lambda: len(sim.runs(slow)) == 2)
    sim.control.remove_agent_fault(forced.id)
    assert sim.control.agent_faults() == []
    by_id = sim.control.add_agent_fault(server=failing, status_code=2, count=2)
    engine.set(failing_token,
               [deployment(f"x-{n}", "again", script, signal=engine.signal_url("again"))
                for n in (2, 3, 4)])
    codes = wait_for(lambda: len(engine.signals_of("again")) == 3 and
                     [s.body["deploy_status_code"] for s in engine.signals_of("again")])
    assert codes == [2, 2, 0]
    assert engine.signals_of("again")[0].body["deploy_stderr"].startswith(
        f"simulated failure (agent fault {by_id.id})")
    assert engine.signals_of("again")[2].body["deploy_stdout"] == "ran\n"


def test_a_script_past_its_time_limit_is_killed_and_reported(sim: Sim) -> None:
    engine = sim.engine
    assert sim.control.set_agent(script_timeout=0.5).script_timeout == 0.5
    sim.boot("sleepy-1", [deployment("s-1", "sleepy", "#!/bin/sh\necho started\nsleep 30\n",
                                     signal=engine.signal_url("sleepy"))])
    [signal] = wait_for(lambda: engine.signals_of("sleepy"))
    assert signal.body["deploy_status_code"] == -1
    assert signal.body["deploy_stdout"] == "started\n"
    assert "timed out" in signal.body["deploy_stderr"]


def test_settings_are_read_and_changed_and_bad_input_is_refused(sim: Sim) -> None:
    control = sim.control
    base = control.url
    assert httpx.get(base + "/agent").json() == {"poll_interval": POLL,
                                                 "script_timeout": 600.0, "enabled": True,
                                                 "execute_scripts": True}
    for body, name in (({"poll_interval": 0}, "poll_interval"),
                        ({"script_timeout": "long"}, "script_timeout"),
                        ({"enabled": "yes"}, "enabled"), ({"colour": "red"}, "colour"),
                        ({"poll_interval": 0.5, "enabled": 1}, "enabled")):
        answer = httpx.put(base + "/agent", json=body)
        assert answer.status_code == 400, body
        assert answer.json()["error"]["message"].startswith(name + ":")
    assert control.agent_settings().poll_interval == POLL  # nothing changed
    for body, name in (({"delay": "x"}, "delay"), ({"status_code": 1.5}, "status_code"),
                        ({"count": 0}, "count"), ({"config": 3}, "config"),
                        ({"server": ["a"]}, "server"), ({"stderr": 1}, "stderr"),
                        ({"kind": "x"}, "kind")):
        answer = httpx.post(base + "/agent/faults", json=body)
        assert answer.status_code == 400, body
        assert answer.json()["error"]["message"].startswith(name + ":")
    answer = httpx.post(base + "/agent/faults", json={"config": "c", "delay": 1})
    assert answer.status_code == 201 and answer.json()["id"]
    assert httpx.delete(f"{base}/agent/faults/{answer.json()['id']}").status_code == 204
    with pytest.raises(ControlError) as refused:
        control.remove_agent_fault(answer.json()["id"])
    assert refused.value.status == 404
    with pytest.raises(ControlError) as refused:
        control.agent_runs(since="x")  # type: ignore[arg-type]
    assert refused.value.status == 400
    assert control.agent_runs(since=1 << 40) == []


def test_a_disabled_agent_does_not_poll_until_enabled(sim: Sim) -> None:
    _, token = sim.boot("paused-1")
    wait_for(lambda: sim.engine.polled(token) > 0)
    assert sim.control.set_agent(enabled=False).enabled is False
    time.sleep(3 * POLL)  # a poll under way may end
    polled = sim.engine.polled(token)
    time.sleep(5 * POLL)
    assert sim.engine.polled(token) == polled
    sim.control.set_agent(enabled=True, poll_interval=0.05)
    wait_for(lambda: sim.engine.polled(token) > polled)


def test_servers_without_the_part_have_no_agent(sim: Sim) -> None:
    conn, engine = sim.conn, sim.engine
    token = uuid.uuid4().hex
    engine.set(token, [])
    plain = [conn.compute.create_server(name=name, flavor_id="1", image_id=sim.image,
                                        networks=[{"uuid": sim.net.id}], **attrs)
             for name, attrs in (
                 ("bare-1", {}), ("bare-2", {"user_data": user_data(None)}),
                 ("bare-3", {"user_data": user_data(engine.metadata_url(token),
                                                    collectors=["ec2"])}),
                 ("bare-4", {"user_data": "bm90IE1JTUU="}))]
    sim.made.extend(str(server.id) for server in plain)
    watched_id, _ = sim.boot("watched-1")
    wait_for(lambda: any(s.server_id == watched_id for s in sim.control.agent_servers()))
    time.sleep(3 * POLL)
    watched = {s.server_id for s in sim.control.agent_servers()}
    assert not watched & {s.id for s in plain}
    assert engine.polled(token) == 0


def test_only_active_servers_poll_and_a_deleted_server_stops(sim: Sim) -> None:
    engine = sim.engine
    rule = sim.control.add_rule("stay_building", kind="server", name="building-*")
    server_id, token = sim.boot("building-1", [deployment("b-1", "built", "", "puppet")])
    wait_for(lambda: any(s.server_id == server_id for s in sim.control.agent_servers()))
    time.sleep(3 * POLL)
    assert engine.polled(token) == 0  # in BUILD: no agent running yet
    sim.control.remove_rule(rule.id)
    wait_for(lambda: sim.runs(server_id))
    sim.conn.compute.delete_server(server_id)
    wait_for(lambda: all(s.server_id != server_id for s in sim.control.agent_servers()))
    polled = engine.polled(token)
    time.sleep(5 * POLL)
    assert engine.polled(token) <= polled + 1  # at most a poll that was under way


def test_a_server_polling_interval_wins_over_the_default(sim: Sim) -> None:
    sim.control.set_agent(poll_interval=5.0)
    _, fast = sim.boot("own-interval-1", polling_interval=0.05)
    _, slow = sim.boot("default-interval-1")
    wait_for(lambda: sim.engine.polled(fast) >= 5)
    assert sim.engine.polled(slow) <= 1


@pytest.mark.parametrize("charset", ["us-ascii", "utf-8"])
def test_the_user_data_part_is_read_as_os_collect_config_reads_it(charset: str) -> None:
    url = "http://127.0.0.1:8004/v1/signed/abc"
    assert agent_config(user_data(url, 2, charset=charset)) == AgentConfig(url, 2.0)
    assert agent_config(user_data(url)) == AgentConfig(url, None)
    assert agent_config(user_data(url, collectors=["ec2", "request"])) == AgentConfig(url)
    assert agent_config(user_data(url, collectors=["ec2"])) is None
    assert agent_config(user_data("file:///etc/passwd")) is None
    assert agent_config(user_data(None)) is None
    for junk in (None, "", "!!!", "bm90IE1JTUU=", 42):
        assert agent_config(junk) is None
