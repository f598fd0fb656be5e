"""An update costs what it changes: the resources it defines alike, that depend only on
resources defined alike, are not planned at all (no node, no step, no event), and everything
that reads what changed is; on the embedded tier under every adversity.
"""

from __future__ import annotations

from convergence.runtime import Runtime

from .harness import Story, res, template
from .test_node_group import untouched


def planned(rt: Runtime, stack_id: str) -> list[str]:
    """The resources the stack's latest traversal planned a converge node for."""
    with rt.store.read() as tx:
        stack = tx.stack(stack_id)
        assert stack is not None and stack.traversal_id is not None
        nodes = tx.nodes(stack.traversal_id, range(1000))
    return sorted(n.name for n in nodes if n.phase == "converge")


def chain(b_value: str, *, extra: bool = False, param: bool = False) -> str:
    """A, B independent; C reads B; D reads C; E reads A."""
    resources = {
        "A": res("a"),
        "B": res({"get_param": "v"} if param else b_value),
        "C": res({"get_attr": ["B", "output"]}),
        "D": res({"get_attr": ["C", "output"]}),
        "E": res({"get_attr": ["A", "output"]}),
    }
    if extra:
        resources["F"] = res("f", depends_on=["A"])
    text = template(resources)
    if param:
        text = text.replace('"resources"', '"parameters": {"v": {"type": "string"}}, '
                            '"resources"', 1)
    return text


def test_an_update_plans_only_what_it_changes_and_what_reads_it(story: Story) -> None:
    rt = story.rt
    story.create(chain("b"))
    first = story.finish()
    before = story.current()
    story.update(chain("b2"))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert planned(rt, done.id) == ["B", "C", "D"]
    after = story.current()
    assert after["D"].attributes["output"] == "b2"
    for name in ("A", "E"):  # the very records, never claimed by a step since
        assert untouched(after[name], before[name])
        assert after[name].generation == done.generation  # converged as they were
    touched = {e.resource_name for e in story.events() if e.resource_name != first.name
               and e.action == "UPDATE"}
    assert touched <= {"B", "C", "D"}


def test_a_new_resource_is_the_only_one_planned(story: Story) -> None:
    rt = story.rt
    story.create(chain("b"))
    story.finish()
    story.update(chain("b", extra=True))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert planned(rt, done.id) == ["F"]


def test_a_parameter_change_reaches_what_reads_it(story: Story) -> None:
    rt = story.rt
    story.create(chain("", param=True), parameters={"v": "p1"})
    story.finish()
    story.update(chain("", param=True), parameters={"v": "p2"})
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert planned(rt, done.id) == ["B", "C", "D"]
    assert story.current()["D"].attributes["output"] == "p2"


def test_a_rollback_puts_back_what_changed(story: Story) -> None:
    rt = story.rt
    story.create(chain("b"))
    story.finish()
    failing = chain("b2").replace('"value": "b2"', '"value": "b2", "fail": true')
    story.update(failing)
    done = story.finish()
    assert done.stack_status == "ROLLBACK_COMPLETE", done.status_reason
    assert "A" not in planned(rt, done.id) and "E" not in planned(rt, done.id)
    current = story.current()
    assert current["B"].attributes["output"] == "b"
    assert current["D"].attributes["output"] == "b"
