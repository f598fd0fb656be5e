"""A thousand resources, wide and layered: create, update every one, delete; counts exact."""

from __future__ import annotations

from typing import Any

import pytest

from .harness import Story, res, template

N = 1000


def shape(kind: str, value: str) -> dict[str, dict[str, Any]]:
    layer = N // 10
    out: dict[str, dict[str, Any]] = {}
    for i in range(N):
        depends = None
        if kind == "layered" and i >= layer:
            prev = (i // layer - 1) * layer
            depends = sorted({f"r{prev + i % layer}", f"r{prev + (i + 1) % layer}"})
        out[f"r{i}"] = res(f"{value}{i}", depends_on=depends)
    return out


@pytest.mark.parametrize("kind", ["wide", "layered"])
def test_a_thousand_resources(story: Story, kind: str) -> None:
    story.create(template(shape(kind, "a")))
    stack = story.finish()
    assert stack.stack_status == "CREATE_COMPLETE"
    current = story.current()
    assert len(current) == N and all(len(v) == 1 for v in story.records().values())
    assert {(r.action, r.status) for r in current.values()} == {("CREATE", "COMPLETE")}
    entities = story.entities()
    assert sorted(entities.values()) == sorted(f"a{i}" for i in range(N))
    ids = {name: r.physical_id for name, r in current.items()}
    tokens = {name: r.fencing_token for name, r in current.items()}

    story.update(template(shape(kind, "b")))
    stack = story.finish()
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert stack.generation == stack.observed_generation == 2
    current = story.current()
    assert {(r.action, r.status) for r in current.values()} == {("UPDATE", "COMPLETE")}
    assert {name: r.physical_id for name, r in current.items()} == ids  # updated in place
    # Each record claimed once, by its converge step: the cleanup of a record kept in place
    # is done without a step (layered: long after its converge, once what was built on it
    # is cleaned up).
    assert {name: r.fencing_token - tokens[name] for name, r in current.items()} == \
        dict.fromkeys(current, 1)
    assert sorted(story.entities().values()) == sorted(f"b{i}" for i in range(N))
    assert story.created_total() == N

    story.delete()
    stack = story.finish()
    assert stack.stack_status == "DELETE_COMPLETE"
    assert story.records() == {} and story.entities() == {}
