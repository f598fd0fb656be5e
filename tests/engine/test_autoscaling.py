"""``OS::Heat::AutoScalingGroup`` and ``OS::Heat::ScalingPolicy`` on the embedded tier, under
every adversity: a policy's signal scales its group as a new generation of the stack (within
its bounds, outside its cooldown, with Heat's arithmetic); a storm of signals ends at the size
they add up to, none lost; a PATCH keeps the size, a new template starts from
``desired_capacity``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from convergence.errors import NotSupported
from convergence.plugins.heat.autoscaling import new_capacity
from convergence.runtime import Runtime
from convergence.services import scaling

from .harness import TENANT, Story
from .test_nested import live_values


def asg(*, desired: int | None = None, min_size: int = 1, max_size: int = 5,
        cooldown: int | None = None, value: str = "m") -> str:
    props: dict[str, Any] = {"min_size": min_size, "max_size": max_size,
                             "resource": {"type": "OS::Heat::TestResource",
                                          "properties": {"value": value}}}
    if desired is not None:
        props["desired_capacity"] = desired
    up: dict[str, Any] = {"auto_scaling_group_id": {"get_resource": "asg"},
                          "adjustment_type": "change_in_capacity", "scaling_adjustment": 1}
    if cooldown is not None:
        up["cooldown"] = cooldown
    return json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {
            "asg": {"type": "OS::Heat::AutoScalingGroup", "properties": props},
            "up": {"type": "OS::Heat::ScalingPolicy", "properties": up},
            "down": {"type": "OS::Heat::ScalingPolicy", "properties": {
                "auto_scaling_group_id": {"get_resource": "asg"},
                "adjustment_type": "change_in_capacity", "scaling_adjustment": -1}},
            "half": {"type": "OS::Heat::ScalingPolicy", "properties": {
                "auto_scaling_group_id": {"get_resource": "asg"},
                "adjustment_type": "percent_change_in_capacity", "scaling_adjustment": -50}},
        },
        "outputs": {"size": {"value": {"get_attr": ["asg", "current_size"]}},
                    "values": {"value": {"get_attr": ["asg", "outputs_list", "output"]}},
                    "url": {"value": {"get_attr": ["up", "signal_url"]}}}})


def size(story: Story) -> int:
    return int(story.stack().outputs["size"]["value"])


def signal(story: Story, policy: str) -> str:
    return scaling.signal_resource(story.rt, TENANT, story.stack().id, policy)


def test_heats_arithmetic_of_an_adjustment() -> None:
    assert new_capacity(3, 2, "change_in_capacity", None, 1, 10) == 5
    assert new_capacity(3, 20, "change_in_capacity", None, 1, 10) == 10
    assert new_capacity(3, 0, "exact_capacity", None, 1, 10) == 1
    assert new_capacity(10, 15, "percent_change_in_capacity", None, 1, 20) == 11
    assert new_capacity(4, 10, "percent_change_in_capacity", None, 1, 20) == 5  # < 1: up
    assert new_capacity(10, -15, "percent_change_in_capacity", None, 1, 20) == 9
    assert new_capacity(10, 15, "percent_change_in_capacity", 3, 1, 20) == 13


def test_signals_scale_the_group_as_new_generations(story: Story) -> None:
    rt = story.rt
    story.create(asg(desired=2))
    first = story.finish()
    assert first.stack_status == "CREATE_COMPLETE", first.status_reason
    assert size(story) == 2
    url = first.outputs["url"]["value"]
    assert url.endswith(f"/v1/{TENANT}/stacks/{first.name}/{first.id}/resources/up/signal")
    assert signal(story, "up") == "scaling asg from 2 to 3 members"
    grown = story.finish()
    assert grown.stack_status == "UPDATE_COMPLETE", grown.status_reason
    assert grown.generation == first.generation + 1
    assert size(story) == 3
    assert live_values(rt, grown.id) == ["m", "m", "m"]
    signal(story, "down")
    signal(story, "down")
    story.finish()
    assert size(story) == 1
    assert signal(story, "down") == "asg stays at 1 members"  # min_size
    story.finish()
    events = [e for e in story.events() if e.action == "SIGNAL"]
    assert [e.resource_name for e in events] == ["up", "down", "down", "down"]
    assert all(e.status == "COMPLETE" for e in events)


def test_a_storm_of_signals_ends_at_their_sum_and_loses_none(story: Story) -> None:
    story.create(asg(min_size=1, max_size=20))
    start = story.finish()
    for _ in range(9):  # nine signals, none waiting for the one before it
        signal(story, "up")
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert size(story) == 10
    assert done.generation == start.generation + 9


def test_a_policys_cooldown_holds_its_next_signals(story: Story) -> None:
    story.create(asg(cooldown=600))
    story.finish()
    assert signal(story, "up").startswith("scaling asg from 1 to 2")
    assert signal(story, "up") == "cooldown in progress (600s): not scaling"
    assert signal(story, "down").startswith("scaling asg from 2 to 1")  # its own cooldown
    assert story.finish().stack_status == "UPDATE_COMPLETE"
    assert size(story) == 1


def test_a_patch_keeps_the_size_and_a_new_template_starts_over(story: Story) -> None:
    rt = story.rt
    story.create(asg(desired=2))
    story.finish()
    signal(story, "up")
    story.finish()
    assert size(story) == 3
    story.update(None, existing=True, parameters={})
    story.finish()
    assert size(story) == 3
    story.update(asg(desired=2, value="n"))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert size(story) == 2
    assert live_values(rt, done.id) == ["n", "n"]


def test_the_percentage_policy_halves_and_only_policies_take_signals(story: Story) -> None:
    story.create(asg(desired=4, max_size=8))
    story.finish()
    signal(story, "half")
    story.finish()
    assert size(story) == 2
    with pytest.raises(NotSupported, match="does not take signals"):
        signal(story, "asg")


def test_what_a_group_shrinks_by_goes_oldest_first(story: Story, ) -> None:
    rt: Runtime = story.rt
    story.create(asg(desired=3))
    first = story.finish()
    with rt.store.read() as tx:
        (child,) = tx.child_stacks(first.id)
        names = sorted(r.name for r in tx.records(child.id))
    assert names == ["0", "1", "2"]
    signal(story, "down")
    story.finish()
    with rt.store.read() as tx:
        assert sorted(r.name for r in tx.records(child.id)) == ["1", "2"]
    signal(story, "up")
    story.finish()
    with rt.store.read() as tx:
        assert sorted(r.name for r in tx.records(child.id)) == ["1", "2", "3"]


def test_a_signal_stamped_earlier_than_the_last_one_still_scales(story: Story) -> None:
    """A signal whose transaction read the clock before another one's stamp, but got the
    stack's lock after it, comes after it: with no cooldown it scales (two clients at once
    lost a signal so)."""
    story.create(asg(min_size=1, max_size=30))
    story.finish()
    assert signal(story, "up") == "scaling asg from 1 to 2 members"
    story.finish()
    story.rt.clock.step_back(5)
    assert signal(story, "up") == "scaling asg from 2 to 3 members"
    story.finish()
    assert size(story) == 3


def test_two_clients_signalling_at_once_lose_no_signal(story: Story) -> None:
    import threading

    story.create(asg(min_size=1, max_size=30))
    start = story.finish()
    errors: list[BaseException] = []

    def client() -> None:
        try:
            for _ in range(5):
                scaling.signal_resource(story.rt, TENANT, start.id, "up")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert size(story) == 11
    assert len([e for e in story.events() if e.action == "SIGNAL"]) == 10
