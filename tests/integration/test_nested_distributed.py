"""Nested stacks and resource groups (``tests/engine/test_nested.py``,
``tests/engine/test_resource_group.py``) on real worker processes: PostgreSQL, Redis and two
``convergence worker`` processes, where a child stack's plan, steps and end (the wake-up of
its parent's parked node) travel through the broker like any other work.

The scenarios are imported, not copied; the ones that drive the in-process dispatcher by hand
stay on the embedded tier.
"""

from tests.engine.test_nested import (  # noqa: F401
    test_a_child_that_fails_fails_its_parent_which_rolls_back,
    test_a_new_nested_template_updates_its_children,
    test_a_stack_delete_deletes_its_children_first,
    test_an_update_reaches_only_the_children_whose_inputs_changed,
    test_nested_stacks_cannot_be_changed_on_their_own,
    test_template_resources_and_stacks_are_child_stacks,
)
from tests.engine.test_resource_group import (  # noqa: F401
    test_a_group_makes_its_members_in_a_nested_stack,
    test_growing_a_group_touches_only_its_new_members,
    test_removal_policies_take_members_from_the_middle_for_good,
)
