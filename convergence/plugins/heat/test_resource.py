"""``OS::Heat::TestResource``: Heat's resource for testing the engine itself.

It stores a value, can be told to fail, to take time over each action (polled, never slept)
and to be replaced on update. Its property set is Heat's, so Heat's test templates run as is.
"""

from __future__ import annotations

from typing import ClassVar

from convergence.template.properties import (
    BOOLEAN,
    MAP,
    NUMBER,
    STRING,
    PropertySchema,
    TypeSchema,
)


class TestResource:
    __test__ = False  # not a pytest test class

    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::TestResource",
        properties={
            "value": PropertySchema(STRING, "The value stored; the output attribute.",
                                    default="test_string", update_allowed=True),
            "update_replace": PropertySchema(BOOLEAN, "Replace, rather than update, when the "
                                             "value changes.", default=False,
                                             update_allowed=True),
            "update_replace_value": PropertySchema(STRING, "Changing it forces replacement."),
            "fail": PropertySchema(BOOLEAN, "Fail the action once its wait has elapsed.",
                                   default=False, update_allowed=True),
            "wait_secs": PropertySchema(NUMBER, "Seconds each action takes (-1: forever).",
                                        default=0, update_allowed=True),
            "action_wait_secs": PropertySchema(
                MAP, "Per-action overrides of wait_secs.", update_allowed=True,
                schema={a: PropertySchema(NUMBER, f"Seconds the {a} action takes.")
                        for a in ("create", "update", "delete")},
            ),
            "attr_wait_secs": PropertySchema(NUMBER, "Seconds resolving attributes takes.",
                                             default=0, update_allowed=True),
            "client_name": PropertySchema(STRING, "A client to poll while waiting.",
                                          default="", update_allowed=True),
            "entity_name": PropertySchema(STRING, "The client's entity to poll.", default="",
                                          update_allowed=True),
            "constraint_prop_secs": PropertySchema(NUMBER, "Seconds validation takes.",
                                                   default=0, update_allowed=True),
        },
        attributes=frozenset({"output"}),
        description="A resource for testing the engine.",
    )
