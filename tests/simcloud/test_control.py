"""The simulated cloud's control plane, through its typed client, and the request faults it
injects as unmodified openstacksdk meets them over real HTTP: bursts of 503, 429 with
``Retry-After``, slow answers, token expiry; the request journal; rules kept in the state."""

from __future__ import annotations

import time
from pathlib import Path

import keystoneauth1.exceptions
import pytest
from openstack import exceptions

from convergence.ports.clock import ManualClock
from convergence_simcloud.client import ControlError, SimControl
from convergence_simcloud.state import Options, SimCloud
from tests.simcloud.conftest import Start, connect
from tests.simcloud.test_network import TWO_PROJECTS


def test_rules_are_added_listed_read_and_removed(cloud_url: str) -> None:
    control = SimControl(cloud_url)
    assert control.rules() == []
    first = control.add_rule("error_after", kind="server", name="web-*", seconds=30,
                             message="hypervisor lost")
    second = control.add_rule("unavailable", service="network", count=3)
    assert [r.id for r in control.rules()] == [first.id, second.id]
    assert control.rule(first.id).message == "hypervisor lost"
    assert (first.effect, first.kind, first.name, first.seconds) == (
        "error_after", "server", "web-*", 30)
    control.remove_rule(first.id)
    assert [r.id for r in control.rules()] == [second.id]
    with pytest.raises(ControlError) as missing:
        control.remove_rule(first.id)
    assert missing.value.status == 404
    control.clear_rules()
    assert control.rules() == []


@pytest.mark.parametrize(("rule", "named"), [
    ({"effect": "explode"}, "effect"),
    ({"effect": "slow", "seconds": -1}, "seconds"),
    ({"effect": "unavailable", "count": 0}, "count"),
    ({"effect": "slow", "service": "dns"}, "service"),
    ({"effect": "slow", "colour": "red"}, "colour"),
    ({"effect": "error_after", "name": 5}, "name"),
])
def test_a_bad_rule_is_refused_naming_the_field_and_adds_nothing(
        cloud_url: str, rule: dict[str, object], named: str) -> None:
    control = SimControl(cloud_url)
    effect = rule.pop("effect")
    with pytest.raises(ControlError, match=named) as refused:
        control.add_rule(str(effect), **rule)
    assert refused.value.status == 400
    assert control.rules() == []


def test_a_burst_of_503_is_seen_by_the_sdk_then_passes(cloud_url: str) -> None:
    control, conn = SimControl(cloud_url), connect(cloud_url)
    before = {n.name for n in conn.network.networks()}
    control.add_rule("unavailable", service="network", count=2)
    for _ in range(2):
        with pytest.raises(exceptions.HttpException) as refused:
            list(conn.network.networks())
        assert refused.value.status_code == 503
    assert {n.name for n in conn.network.networks()} == before
    assert control.rules() == []  # spent
    assert list(conn.compute.flavors())  # other services were never touched


def test_a_429_carries_retry_after_in_the_services_body(cloud_url: str) -> None:
    control, conn = SimControl(cloud_url), connect(cloud_url)
    list(conn.compute.flavors())  # discovery done before the rule
    control.add_rule("rate_limited", service="compute", path="/compute/v2.1/flavors*",
                     seconds=30, count=1)
    with pytest.raises(exceptions.HttpException) as limited:
        list(conn.compute.flavors())
    assert limited.value.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "30"
    assert limited.value.response.json()["overLimit"]["code"] == 429
    assert [f.name for f in conn.compute.flavors()][:1] == ["m1.tiny"]


def test_an_expired_token_makes_the_sdk_authenticate_again(cloud_url: str) -> None:
    control, conn = SimControl(cloud_url), connect(cloud_url)
    list(conn.compute.flavors())
    mark = control.last()
    control.add_rule("token_expiry", service="compute", path="/compute/v2.1/flavors*",
                     count=1)
    assert len(list(conn.compute.flavors())) == 5
    seen = [(e.method, e.path, e.status) for e in control.journal(mark)]
    assert seen == [("GET", "/compute/v2.1/flavors/detail", 401),
                    ("POST", "/v3/auth/tokens", 201),
                    ("GET", "/compute/v2.1/flavors/detail", 200)]


def test_a_slow_answer_times_the_client_out(cloud_url: str) -> None:
    control, conn = SimControl(cloud_url), connect(cloud_url, api_timeout=0.3)
    list(conn.compute.flavors())
    control.add_rule("slow", service="compute", path="/compute/v2.1/flavors*", seconds=1.0,
                     count=1)
    with pytest.raises(keystoneauth1.exceptions.ConnectTimeout):
        list(conn.compute.flavors())
    assert len(list(conn.compute.flavors())) == 5  # spent: the next answer is on time


def test_the_journal_says_who_called_what(start_cloud: Start) -> None:
    _, url = start_cloud(TWO_PROJECTS)
    control = SimControl(url)
    admin = connect(url)
    demo = connect(url, username="demo", password="demo", project_name="demo")
    mark = control.last()
    admin.network.create_network(name="a")
    demo.network.create_network(name="d")
    posts = control.journal(mark, method="POST", service="network")
    assert [(e.path, e.status) for e in posts] == [("/network/v2.0/networks", 201)] * 2
    assert posts[0].project_id != posts[1].project_id
    mine = control.journal(mark, project_id=posts[1].project_id, path="/network/*")
    assert [e.method for e in mine] == ["POST"]
    assert all(e.seq > mark for e in control.journal(mark))
    assert not any(e.path.startswith("/_sim") for e in control.journal())
    assert control.objects()["network"] == 3  # the seeded public one and the two made here
    control.clear_journal()
    assert control.journal() == []


def test_rules_are_kept_in_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "cloud.json"
    cloud = SimCloud(options=Options(state_file=state), clock=ManualClock(time.time()))
    from convergence_simcloud.serve import running
    with running(cloud) as url:
        SimControl(url).add_rule("vanish_after", kind="server", metadata={"doomed": "yes"},
                                 seconds=60)
    again = SimCloud(options=Options(state_file=state), clock=ManualClock(time.time()))
    with running(again) as url:
        [rule] = SimControl(url).rules()
    assert (rule.effect, rule.metadata, rule.seconds) == ("vanish_after", {"doomed": "yes"},
                                                          60)


def test_a_late_answer_is_done_at_once_and_answered_late(cloud_url: str) -> None:
    """The network exists before the client hears of it: a client that gives up (or dies)
    meanwhile made it all the same, and finds it by name afterwards."""
    control, conn = SimControl(cloud_url), connect(cloud_url)
    impatient = connect(cloud_url, api_timeout=0.3)  # gives up before the answer
    for _ in range(5):  # discovery and token before the rule's request (a loaded machine
        try:            # may answer a first request later than the impatient client waits)
            list(impatient.network.networks())
            break
        except keystoneauth1.exceptions.ConnectTimeout:
            continue
    control.add_rule("late_answer", service="network", method="POST", seconds=1.0, count=1)
    with pytest.raises(keystoneauth1.exceptions.ConnectTimeout):
        impatient.network.create_network(name="late")
    assert conn.network.find_network("late") is not None
