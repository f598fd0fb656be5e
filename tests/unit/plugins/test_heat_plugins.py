"""The OS::Heat::* plugins driven directly, as the engine's step would, on a fake clock.

Waits are checked by advancing the clock, never by sleeping; TestResource's effects are checked
on the entities left in a :class:`MemoryTestEntities`, not on mocks.
"""

from __future__ import annotations

import string
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convergence.plugins.base import (
    CREATE,
    DELETE,
    UPDATE,
    PluginBase,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.heat.none import NoneResource, owner_uuid
from convergence.plugins.heat.random_string import SEQUENCES, RandomStringResource, generate
from convergence.plugins.heat.test_backend import TEST_ENTITIES
from convergence.plugins.heat.test_entities import MemoryTestEntities
from convergence.plugins.heat.test_resource import MAX_DELAY, TestResource
from convergence.plugins.heat.value import ValueResource

LENGTH_MESSAGE = ("Length property cannot be smaller than combined character class and "
                  "character sequence minimums")


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, secs: float) -> None:
        self.t += secs


def make_ctx(clock: FakeClock | None = None, entities: MemoryTestEntities | None = None,
             owner: str = "record-1") -> PluginContext:
    return PluginContext(owner=owner, stack_id="stack-1", stack_name="s", resource_name="r",
                         now=(clock or FakeClock()).now,
                         backends={} if entities is None else {TEST_ENTITIES: entities})


def props_of(plugin: type[PluginBase], **given: Any) -> dict[str, Any]:
    """Properties as the engine passes them: top-level schema defaults applied."""
    schemas = plugin.schema.properties or {}
    out = {n: s.default for n, s in schemas.items() if s.default is not None}
    out.update(given)
    return out


def drive(plugin: PluginBase, ctx: PluginContext, clock: FakeClock, action: str,
          progress: Progress, props: Mapping[str, Any], limit: int = 1000) -> Progress:
    """Poll as the engine would, letting each requested delay pass, until finished."""
    for _ in range(limit):
        if progress.done:
            return progress
        assert 0 < progress.delay <= MAX_DELAY
        clock.advance(progress.delay)
        progress = plugin.poll(ctx, action, progress.physical_id, props, progress.state)
    raise AssertionError(f"{action} still pending after {limit} polls")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def entities() -> MemoryTestEntities:
    return MemoryTestEntities()


@pytest.fixture
def ctx(clock: FakeClock, entities: MemoryTestEntities) -> PluginContext:
    return make_ctx(clock, entities)


# OS::Heat::None


def test_none_finishes_at_once_with_an_id_from_the_owner() -> None:
    plugin = NoneResource()
    first = plugin.create(make_ctx(owner="a"), {"anything": [1, 2]})
    again = plugin.create(make_ctx(owner="a"), {})
    other = plugin.create(make_ctx(owner="b"), {})
    assert first.done and first.physical_id == again.physical_id == owner_uuid("a")
    assert other.physical_id != first.physical_id
    assert first.attributes == {}


def test_none_never_replaces_and_updates_and_deletes_at_once() -> None:
    plugin, ctx = NoneResource(), make_ctx(owner="a")
    assert not plugin.needs_replace({"x": 1}, {"x": 2, "y": 3})
    updated = plugin.update(ctx, "pid", {"x": 1}, {"x": 2})
    assert updated.done and updated.physical_id == "pid"
    assert plugin.update(ctx, None, {}, {}).physical_id == owner_uuid("a")
    assert plugin.delete(ctx, "pid", {}).done
    assert plugin.reference_id("pid", {}, {}) == "pid"


# OS::Heat::Value


@pytest.mark.parametrize(("value_type", "value", "expected"), [
    (None, {"a": [1, "x"]}, {"a": [1, "x"]}),
    (None, "7", "7"),
    ("string", 42, "42"),
    ("string", "text", "text"),
    ("number", "7", 7),
    ("number", "3.5", 3.5),
    ("number", 2, 2),
    ("comma_delimited_list", "a,b, c", ["a", "b", " c"]),
    ("comma_delimited_list", ["a", 1], ["a", "1"]),
    ("comma_delimited_list", "", []),
    ("json", '{"a": [1, 2]}', {"a": [1, 2]}),
    ("json", {"k": ["v"]}, {"k": ["v"]}),
    ("json", [1, {"x": None}], [1, {"x": None}]),
    ("boolean", "yes", True),
    ("boolean", "false", False),
    ("boolean", True, True),
])
def test_value_converts_as_a_parameter_of_its_type(value_type: str | None, value: Any,
                                                  expected: Any) -> None:
    props = {"value": value} if value_type is None else {"value": value, "type": value_type}
    progress = ValueResource().create(make_ctx(owner="v"), props)
    assert progress.done and progress.physical_id == owner_uuid("v")
    assert progress.attributes == {"value": expected}


@pytest.mark.parametrize(("value_type", "value", "fragment"), [
    ("number", "abc", "not a number"),
    ("boolean", "maybe", "not a boolean"),
    ("json", "{not json", "not valid JSON"),
    ("comma_delimited_list", {"a": 1}, "not a comma-delimited string"),
    ("string", {"a": 1}, "must be a string, not a map"),
    ("string", [1], "must be a string, not a list"),
])
def test_value_that_cannot_take_its_type_fails_the_resource(value_type: str, value: Any,
                                                             fragment: str) -> None:
    with pytest.raises(ResourceFailure, match=fragment):
        ValueResource().create(make_ctx(), {"value": value, "type": value_type})


def test_value_updates_in_place_with_the_new_typed_value() -> None:
    plugin, ctx = ValueResource(), make_ctx(owner="v")
    old = {"value": "1"}
    new = {"value": "2,3", "type": "comma_delimited_list"}
    assert not plugin.needs_replace(old, new)
    created = plugin.create(ctx, old)
    updated = plugin.update(ctx, created.physical_id, old, new)
    assert updated.done and updated.physical_id == created.physical_id
    assert updated.attributes == {"value": ["2", "3"]}


# OS::Heat::RandomString


def test_random_string_defaults_to_32_letters_and_digits() -> None:
    plugin = RandomStringResource()
    progress = plugin.create(make_ctx(owner="p"), props_of(RandomStringResource))
    assert progress.done and progress.physical_id == owner_uuid("p")
    assert progress.attributes is not None
    value = progress.attributes["value"]
    assert len(value) == 32 and set(value) <= set(SEQUENCES["lettersdigits"])
    assert plugin.reference_id(progress.physical_id, {}, progress.attributes) == value


def test_random_string_is_new_each_time() -> None:
    values = {generate({"length": 32}) for _ in range(20)}
    assert len(values) == 20


def test_random_string_deprecated_sequence_chooses_the_class() -> None:
    value = generate({"length": 64, "sequence": "octdigits"})
    assert len(value) == 64 and set(value) <= set(string.octdigits)


def test_random_string_refuses_deprecated_sequence_with_classes() -> None:
    with pytest.raises(ResourceFailure, match="deprecated 'sequence'"):
        generate({"length": 8, "sequence": "digits",
                  "character_classes": [{"class": "letters", "min": 1}]})


@pytest.mark.parametrize("props", [
    {"length": 3, "character_classes": [{"class": "digits", "min": 2},
                                        {"class": "letters", "min": 2}]},
    {"length": 3, "character_sequences": [{"sequence": "!?", "min": 4}]},
    {"length": 4, "character_classes": [{"class": "digits", "min": 3}],
     "character_sequences": [{"sequence": "#", "min": 2}]},
])
def test_random_string_minimums_beyond_length_fail_with_heats_message(
        props: dict[str, Any]) -> None:
    with pytest.raises(ResourceFailure) as raised:
        RandomStringResource().create(make_ctx(), props)
    assert str(raised.value) == LENGTH_MESSAGE


def test_random_string_minimums_equal_to_length_are_exact() -> None:
    value = generate({"length": 5, "character_classes": [{"class": "digits", "min": 2}],
                      "character_sequences": [{"sequence": "#", "min": 3}]})
    assert sorted(value)[:3] == ["#", "#", "#"]
    assert sum(c in string.digits for c in value) == 2


def test_random_string_item_defaults_apply_when_missing() -> None:
    # The engine applies top-level defaults; an item's class and min may still be absent.
    value = generate({"length": 10, "character_classes": [{}]})
    assert len(value) == 10 and set(value) <= set(SEQUENCES["lettersdigits"])


def test_random_string_replaces_on_any_change() -> None:
    plugin = RandomStringResource()
    base = props_of(RandomStringResource, salt="a")
    assert not plugin.needs_replace(base, dict(base))
    assert plugin.needs_replace(base, {**base, "salt": "b"})
    assert plugin.needs_replace(base, {**base, "length": 12})


_classes = st.lists(st.fixed_dictionaries({"class": st.sampled_from(sorted(SEQUENCES)),
                                           "min": st.integers(1, 6)}), max_size=4)
_sequences = st.lists(st.fixed_dictionaries({
    "sequence": st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]),
                        min_size=1, max_size=6),
    "min": st.integers(1, 6)}), max_size=3)


@given(classes=_classes, sequences=_sequences, extra=st.integers(0, 30))
def test_random_string_honours_every_minimum(classes: list[dict[str, Any]],
                                             sequences: list[dict[str, Any]],
                                             extra: int) -> None:
    length = max(1, sum(c["min"] for c in classes) + sum(s["min"] for s in sequences) + extra)
    props = {"length": length, "character_classes": classes, "character_sequences": sequences}
    value = generate(props)
    assert len(value) == length
    pools = [SEQUENCES[c["class"]] for c in classes] + [s["sequence"] for s in sequences]
    allowed = set("".join(pools)) if pools else set(SEQUENCES["lettersdigits"])
    assert set(value) <= allowed
    for pool, minimum in [(SEQUENCES[c["class"]], c["min"]) for c in classes] + [
            (s["sequence"], s["min"]) for s in sequences]:
        assert sum(ch in pool for ch in value) >= minimum


# OS::Heat::TestResource


def tr(**given: Any) -> dict[str, Any]:
    return props_of(TestResource, **given)


def test_test_resource_is_preemptible() -> None:
    assert TestResource.preemptible is True


def test_create_without_wait_finishes_with_the_entity(ctx: PluginContext,
                                                      entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    progress = plugin.create(ctx, tr(value="hello"))
    assert progress.done and progress.attributes == {"output": "hello"}
    assert entities.live() == {progress.physical_id: ("record-1", "hello")}
    assert plugin.reference_id(progress.physical_id, tr(), progress.attributes) == \
        progress.physical_id


def test_create_waits_as_pending_progress_until_the_clock_passes(
        ctx: PluginContext, clock: FakeClock, entities: MemoryTestEntities) -> None:
    plugin, props = TestResource(), tr(value="v", wait_secs=2.5)
    progress = plugin.create(ctx, props)
    assert not progress.done and progress.delay == MAX_DELAY
    # The entity exists while the action is in progress, under the id the engine records.
    assert entities.live() == {progress.physical_id: ("record-1", "v")}
    clock.advance(2.0)
    progress = plugin.poll(ctx, CREATE, progress.physical_id, props, progress.state)
    assert not progress.done and progress.delay == pytest.approx(0.5)
    clock.advance(0.5)
    progress = plugin.poll(ctx, CREATE, progress.physical_id, props, progress.state)
    assert progress.done and progress.attributes == {"output": "v"}


def test_action_wait_secs_overrides_wait_secs(ctx: PluginContext, clock: FakeClock) -> None:
    plugin = TestResource()
    assert plugin.create(ctx, tr(wait_secs=10, action_wait_secs={"create": 0})).done
    props = tr(wait_secs=0, action_wait_secs={"create": 3, "delete": None})
    start = clock.now()
    done = drive(plugin, ctx, clock, CREATE, plugin.create(ctx, props), props)
    assert done.done and clock.now() - start == pytest.approx(3)


def test_wait_of_minus_one_is_forever(ctx: PluginContext, clock: FakeClock) -> None:
    plugin, props = TestResource(), tr(wait_secs=-1)
    progress = plugin.create(ctx, props)
    for _ in range(5):
        assert not progress.done and progress.delay == MAX_DELAY
        clock.advance(10_000)
        progress = plugin.poll(ctx, CREATE, progress.physical_id, props, progress.state)
    assert not progress.done


def test_failing_create_leaves_no_entity(ctx: PluginContext,
                                         entities: MemoryTestEntities) -> None:
    with pytest.raises(ResourceFailure, match=r"^Test Resource failed$"):
        TestResource().create(ctx, tr(fail=True))
    assert entities.live() == {}


def test_failing_create_fails_after_its_wait(ctx: PluginContext, clock: FakeClock,
                                             entities: MemoryTestEntities) -> None:
    plugin, props = TestResource(), tr(fail=True, wait_secs=3)
    progress = plugin.create(ctx, props)
    assert not progress.done and len(entities.live()) == 1
    clock.advance(2.9)
    progress = plugin.poll(ctx, CREATE, progress.physical_id, props, progress.state)
    assert not progress.done
    clock.advance(0.1)
    with pytest.raises(ResourceFailure, match="Test Resource failed"):
        plugin.poll(ctx, CREATE, progress.physical_id, props, progress.state)
    assert entities.live() == {}


def test_create_again_for_the_same_owner_adopts(ctx: PluginContext, clock: FakeClock,
                                                entities: MemoryTestEntities) -> None:
    # A worker died after the entity was made but before the engine recorded anything.
    plugin, props = TestResource(), tr(value="v", wait_secs=5)
    lost = plugin.create(ctx, props)
    clock.advance(1)
    again = plugin.create(ctx, props)
    assert again.physical_id == lost.physical_id
    assert entities.created_count("record-1") == 1 and len(entities.live()) == 1
    done = drive(plugin, ctx, clock, CREATE, again, props)
    assert done.attributes == {"output": "v"}
    assert entities.created_count("record-1") == 1


def test_adoption_keeps_owners_apart(clock: FakeClock, entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    a = plugin.create(make_ctx(clock, entities, owner="a"), tr(value="x"))
    b = plugin.create(make_ctx(clock, entities, owner="b"), tr(value="x"))
    assert a.physical_id != b.physical_id and len(entities.live()) == 2


def test_interrupted_failing_create_is_cleaned_up_when_retried(
        ctx: PluginContext, entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    plugin.create(ctx, tr(fail=True, wait_secs=5))  # the engine never recorded this
    with pytest.raises(ResourceFailure):
        plugin.create(ctx, tr(fail=True))
    assert entities.live() == {} and entities.created_count("record-1") == 1


def test_update_sets_the_value_and_waits(ctx: PluginContext, clock: FakeClock,
                                         entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    old = tr(value="one")
    pid = plugin.create(ctx, old).physical_id
    new = tr(value="two", action_wait_secs={"update": 2})
    assert not plugin.needs_replace(old, new)
    progress = plugin.update(ctx, pid, old, new)
    assert not progress.done and entities.get(str(pid)) == "two"
    start = clock.now()
    done = drive(plugin, ctx, clock, UPDATE, progress, new)
    assert clock.now() - start == pytest.approx(2)
    assert done.physical_id == pid and done.attributes == {"output": "two"}
    assert entities.created_count("record-1") == 1


def test_update_without_a_value_change_finishes_at_once(ctx: PluginContext) -> None:
    # Heat only spends wait_secs on an update that changes the value.
    plugin = TestResource()
    old = tr(value="same")
    pid = plugin.create(ctx, old).physical_id
    progress = plugin.update(ctx, pid, old, tr(value="same", wait_secs=30))
    assert progress.done and progress.attributes == {"output": "same"}


def test_failing_update_keeps_the_old_value_and_fails_after_the_wait(
        ctx: PluginContext, clock: FakeClock, entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    old = tr(value="one")
    pid = plugin.create(ctx, old).physical_id
    new = tr(value="two", fail=True, wait_secs=1.5)
    progress = plugin.update(ctx, pid, old, new)
    assert not progress.done
    clock.advance(1.5)
    with pytest.raises(ResourceFailure, match="Test Resource failed"):
        plugin.poll(ctx, UPDATE, pid, new, progress.state)
    assert entities.live() == {pid: ("record-1", "one")}


def test_failing_update_without_value_change_fails_at_once(ctx: PluginContext) -> None:
    plugin = TestResource()
    old = tr()
    pid = plugin.create(ctx, old).physical_id
    with pytest.raises(ResourceFailure, match="Test Resource failed"):
        plugin.update(ctx, pid, old, tr(fail=True))


def test_update_recreates_an_entity_lost_behind_the_engines_back(
        ctx: PluginContext, entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    old = tr(value="one")
    pid = str(plugin.create(ctx, old).physical_id)
    entities.delete(pid)
    progress = plugin.update(ctx, pid, old, tr(value="two"))
    assert progress.done and progress.attributes == {"output": "two"}
    assert entities.live() == {progress.physical_id: ("record-1", "two")}


def test_output_reads_the_entity(ctx: PluginContext, clock: FakeClock,
                                 entities: MemoryTestEntities) -> None:
    plugin, props = TestResource(), tr(value="v", wait_secs=1)
    progress = plugin.create(ctx, props)
    entities.update(str(progress.physical_id), "changed meanwhile")
    done = drive(plugin, ctx, clock, CREATE, progress, props)
    assert done.attributes == {"output": "changed meanwhile"}


def test_delete_removes_the_entity_then_waits(ctx: PluginContext, clock: FakeClock,
                                              entities: MemoryTestEntities) -> None:
    plugin, props = TestResource(), tr(action_wait_secs={"delete": 2})
    pid = plugin.create(ctx, props).physical_id
    progress = plugin.delete(ctx, pid, props)
    assert not progress.done and entities.live() == {}
    assert drive(plugin, ctx, clock, DELETE, progress, props).done


def test_a_delete_that_waited_removes_what_a_lost_step_made_meanwhile(
        ctx: PluginContext, clock: FakeClock, entities: MemoryTestEntities) -> None:
    plugin, props = TestResource(), tr(action_wait_secs={"delete": 2})
    pid = plugin.create(ctx, props).physical_id
    progress = plugin.delete(ctx, pid, props)
    # While the delete waits, a step converging to a newer definition makes the resource
    # again and dies before the engine records it; then the newer definition is withdrawn.
    plugin.update(ctx, pid, props, tr(value="back"))
    assert len(entities.live()) == 1
    assert drive(plugin, ctx, clock, DELETE, progress, props).done
    assert entities.live() == {}


def test_delete_is_idempotent_and_never_fails(ctx: PluginContext,
                                              entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    pid = plugin.create(ctx, tr()).physical_id
    failing = tr(fail=True)
    assert plugin.delete(ctx, pid, failing).done
    assert plugin.delete(ctx, pid, failing).done
    assert plugin.delete(ctx, None, failing).done
    assert plugin.delete(ctx, "never-existed", failing).done
    assert entities.live() == {}


def test_delete_finds_an_entity_whose_id_was_never_recorded(
        ctx: PluginContext, entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    plugin.create(ctx, tr(wait_secs=5))  # crashed before the engine stored the id
    assert plugin.delete(ctx, None, tr()).done
    assert entities.live() == {}


def test_delete_leaves_other_owners_alone(clock: FakeClock,
                                          entities: MemoryTestEntities) -> None:
    plugin = TestResource()
    keep = plugin.create(make_ctx(clock, entities, owner="keep"), tr()).physical_id
    gone_ctx = make_ctx(clock, entities, owner="gone")
    gone = plugin.create(gone_ctx, tr()).physical_id
    plugin.delete(gone_ctx, gone, tr())
    assert list(entities.live()) == [keep]


@pytest.mark.parametrize(("old", "new", "replace"), [
    ({}, {}, False),
    ({"value": "a"}, {"value": "b"}, False),
    ({"value": "a"}, {"value": "b", "update_replace": True}, True),
    ({"value": "a", "update_replace": True}, {"value": "b"}, False),  # the new flag decides
    ({"update_replace": False}, {"update_replace": True}, False),  # no value change
    ({"update_replace_value": "x"}, {"update_replace_value": "y"}, True),
    ({}, {"update_replace_value": "y"}, True),
    ({"wait_secs": 0, "fail": False}, {"wait_secs": 5, "fail": True}, False),
])
def test_replacement_rules(old: dict[str, Any], new: dict[str, Any], replace: bool) -> None:
    assert TestResource().needs_replace(tr(**old), tr(**new)) is replace


def test_without_a_backend_the_resource_fails() -> None:
    with pytest.raises(ResourceFailure, match="test entity backend"):
        TestResource().create(make_ctx(entities=None), tr())


@given(secs=st.floats(0.01, 50), steps=st.lists(st.floats(0, 3), min_size=1, max_size=60))
def test_pending_until_exactly_the_deadline(secs: float, steps: list[float]) -> None:
    clock, entities = FakeClock(), MemoryTestEntities()
    ctx, plugin, props = make_ctx(clock, entities), TestResource(), tr(wait_secs=secs)
    start = clock.now()
    progress = plugin.create(ctx, props)
    for step in steps:
        if progress.done:
            break
        assert 0 < progress.delay <= MAX_DELAY
        clock.advance(step)
        progress = plugin.poll(ctx, CREATE, progress.physical_id, props, progress.state)
    assert progress.done == (clock.now() >= start + secs)


# MemoryTestEntities


def test_memory_entities_protocol_and_helpers() -> None:
    entities = MemoryTestEntities()
    eid = entities.create("o", "v")
    assert entities.find("o") == (eid, "v") and entities.get(eid) == "v"
    entities.update(eid, "w")
    assert entities.live() == {eid: ("o", "w")}
    entities.delete(eid)
    entities.delete(eid)
    assert entities.find("o") is None and entities.get(eid) is None
    assert entities.created_count("o") == 1 and entities.created_count("other") == 0
    with pytest.raises(KeyError):
        entities.update(eid, "x")


def test_memory_entities_are_thread_safe() -> None:
    entities = MemoryTestEntities()

    def work(n: int) -> None:
        for i in range(200):
            eid = entities.create(f"owner-{n}", str(i))
            entities.update(eid, "u")
            if i % 2:
                entities.delete(eid)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(entities.live()) == 8 * 100
    assert all(entities.created_count(f"owner-{n}") == 200 for n in range(8))
