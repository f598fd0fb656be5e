"""The shortcuts that make large templates cheap give the answers of the general paths.

The structural check settles common resource entries with a few type checks instead of the
compiled schema (``structure._settled_resource``); cycles are looked for by one depth-first
pass before any is named (``dependencies._acyclic``); the cycle collector is paused while a
template is read (``collector.collector_paused``). Each is held here to the general answer.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convergence.template.collector import collector_paused
from convergence.template.dependencies import _strongly_connected, find_cycles
from convergence.template.errors import Problems
from convergence.template.structure import (
    _entry_validators,
    _quick_resources,
    _settled_resource,
    check_structure,
)

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=2),
    max_leaves=4,
)
_keys = st.sampled_from(["type", "properties", "metadata", "update_policy", "depends_on",
                         "condition", "description", "deletion_policy", "external_id",
                         "typo"])
_entries = st.dictionaries(_keys, _values | st.just("OS::Heat::None") | st.just({}),
                           max_size=5) | _values


def test_the_quick_resource_rules_are_the_schemas() -> None:
    # Were the schema to change what it says of resources, the shortcut would switch off.
    assert _quick_resources()


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_entries)
def test_a_settled_resource_entry_is_one_the_schema_accepts(entry: Any) -> None:
    validate = _entry_validators("template")["resources"]
    if _settled_resource(entry):
        validate(entry)  # raises if the schema refuses it


def test_an_unsettled_entry_among_settled_ones_is_still_reported() -> None:
    resources: dict[str, Any] = {f"r{i}": {"type": "OS::Heat::None", "properties": {}}
                                 for i in range(50)}
    resources["r25"] = {"type": "OS::Heat::None", "properties": []}
    resources["r30"] = {"type": "OS::Heat::None", "condtion": "c"}
    problems = Problems()
    data = {"heat_template_version": "2018-08-31", "resources": resources}
    assert not check_structure(data, "template", problems)
    paths = [p.path for p in problems]
    assert "resources.r25.properties" in paths and "resources.r30" in " ".join(paths)


_graphs = st.dictionaries(
    st.sampled_from("abcdefgh"), st.lists(st.sampled_from("abcdefghxy"), max_size=3),
    max_size=8)


@settings(max_examples=400)
@given(_graphs)
def test_the_depth_first_pass_agrees_with_the_components(graph: dict[str, list[str]]) -> None:
    cyclic = [c for c in _strongly_connected(graph)
              if len(c) > 1 or min(c) in set(graph.get(min(c), ()))]
    assert bool(find_cycles(graph)) == bool(cyclic)
    assert len(find_cycles(graph)) == len(cyclic)


def test_a_cycle_at_the_end_of_a_long_chain_is_named() -> None:
    graph = {f"r{i}": [f"r{i - 1}"] if i else [] for i in range(200_000)}
    assert find_cycles(graph) == []
    graph["r0"] = ["r199999"]
    cycles = find_cycles(graph)
    assert len(cycles) == 1 and cycles[0][0] == cycles[0][-1] and len(cycles[0]) == 200_001


def test_the_collector_is_paused_inside_and_resumed_by_the_last_user() -> None:
    assert gc.isenabled()
    inside: list[bool] = []
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            entered.set()
            release.wait(5)
            inside.append(gc.isenabled())

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        entered.wait(5)
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still reads
    release.set()
    thread.join(5)
    assert inside == [False] and gc.isenabled()


def test_the_collector_stays_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
