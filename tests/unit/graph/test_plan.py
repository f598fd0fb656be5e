"""Planning: nodes, edges and their counters."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from convergence.graph.plan import CLEANUP, CONVERGE, RecordInfo, build_plan, choose_records


def edges(plan):  # type: ignore[no-untyped-def]
    by_seq = {n.seq: n for n in plan.nodes}
    return {((by_seq[n.seq].phase, by_seq[n.seq].name), (by_seq[s].phase, by_seq[s].name))
            for n in plan.nodes for s in n.successors}


def test_create_has_converge_nodes_along_dependencies() -> None:
    plan = build_plan({"a": [], "b": [], "c": ["a", "b"], "d": ["c"]},
                      {"a": 1, "b": 2, "c": 3, "d": 4}, [])
    assert {n.phase for n in plan.nodes} == {CONVERGE}
    assert edges(plan) == {((CONVERGE, "a"), (CONVERGE, "c")), ((CONVERGE, "b"), (CONVERGE, "c")),
                           ((CONVERGE, "c"), (CONVERGE, "d"))}
    assert sorted(plan.nodes[s].name for s in plan.ready) == ["a", "b"]


def test_cleanup_follows_stored_requires_reversed() -> None:
    records = [RecordInfo(1, "a"), RecordInfo(2, "c", (1,)), RecordInfo(3, "e", (2,))]
    plan = build_plan({"a": [], "c": ["a"]}, {"a": 1, "c": 2}, records)
    e = edges(plan)
    assert ((CLEANUP, "e"), (CLEANUP, "c")) in e  # e goes before what it was built on
    assert ((CLEANUP, "c"), (CLEANUP, "a")) in e
    assert ((CONVERGE, "c"), (CLEANUP, "c")) in e
    # e is not in the template: its cleanup waits for nothing
    seq_e = next(n.seq for n in plan.nodes if n.phase == CLEANUP and n.name == "e")
    assert seq_e in plan.ready


def test_delete_plan_has_only_cleanup_nodes() -> None:
    records = [RecordInfo(1, "a"), RecordInfo(2, "b", (1,))]
    plan = build_plan({}, {}, records)
    assert {n.phase for n in plan.nodes} == {CLEANUP}
    assert edges(plan) == {((CLEANUP, "b"), (CLEANUP, "a"))}


def test_choose_records_prefers_the_newest_unreplaced() -> None:
    chosen = choose_records([RecordInfo(1, "c", replaced_by=4), RecordInfo(4, "c"),
                             RecordInfo(2, "d"), RecordInfo(3, "d")])
    assert chosen["c"].id == 4 and chosen["d"].id == 3


# A seed rather than ``st.randoms()``: a graph of 60 nodes asks for about 2,000 random
# draws, past what Hypothesis lets one example take from its own data (its health check then
# fails the test before it runs).
@given(st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_counters_match_edges_and_everything_is_reachable(n: int, seed: int) -> None:
    rnd = random.Random(seed)
    wanted = {f"r{i}": [f"r{j}" for j in range(i) if rnd.random() < 0.2] for i in range(n)}
    records = [RecordInfo(i + 100, f"r{i}", tuple(j + 100 for j in range(i)
                                                  if rnd.random() < 0.1)) for i in range(n)
               if rnd.random() < 0.5]
    plan = build_plan(wanted, {name: int(name[1:]) + 100 for name in wanted}, records)
    incoming = {n.seq: 0 for n in plan.nodes}
    for node in plan.nodes:
        for s in node.successors:
            incoming[s] += 1
    assert all(node.pending == incoming[node.seq] for node in plan.nodes)
    # Kahn's algorithm consumes every node: the plan has no cycle.
    pending = {node.seq: node.pending for node in plan.nodes}
    ready = list(plan.ready)
    seen = 0
    while ready:
        seq = ready.pop()
        seen += 1
        for s in plan.nodes[seq].successors:
            pending[s] -= 1
            if pending[s] == 0:
                ready.append(s)
    assert seen == len(plan.nodes)
