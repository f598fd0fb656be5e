"""A process keeps the definitions its traversals use, and lets go of one its stack has moved
on from: an update that ends well drops the definition of the template it replaced at once,
not when the cache is full (for a group of a million members a definition weighs about a
GiB, and holding the old one beside the new is what set the engine's peak memory). The
parsed template goes with it: the cache of parsed templates holds them only weakly.
"""

from __future__ import annotations

import gc
import weakref

from .harness import Story, res, template


def test_an_update_that_ends_well_drops_the_definition_it_replaced(story: Story) -> None:
    rt = story.rt
    story.create(template({"a": res("one"), "b": res("two", depends_on=["a"])}))
    first = story.finish()
    assert first.stack_status == "CREATE_COMPLETE", first.status_reason
    old = first.template_id
    assert old is not None and old in rt.engine.definitions
    parsed = weakref.ref(rt.engine.definitions.get(old).template)

    story.update(template({"a": res("uno"), "b": res("two", depends_on=["a"])}))
    done = story.finish()
    assert done.stack_status == "UPDATE_COMPLETE", done.status_reason
    assert done.template_id is not None and done.template_id != old
    assert done.template_id in rt.engine.definitions
    assert old not in rt.engine.definitions
    gc.collect()
    assert parsed() is None  # nothing else kept the parsed template alive

    # Whoever needs it again builds it again, from the stored template.
    with rt.store.read() as tx:
        again = rt.engine.definitions.get(old, tx.template)
    assert sorted(again.template.resources) == ["a", "b"]
    assert again.template.resources["a"].properties == {"value": "one"}


def test_a_check_or_a_failed_update_keeps_the_definition_in_use(story: Story) -> None:
    rt = story.rt
    story.create(template({"a": res("one")}))
    first = story.finish()
    kept = first.template_id
    assert kept is not None
    story.update(template({"a": res("one"), "bad": res("x", fail=True)}),
                 disable_rollback=True)
    failed = story.finish()
    assert failed.stack_status == "UPDATE_FAILED"
    assert kept in rt.engine.definitions  # the stack has not moved on from it
