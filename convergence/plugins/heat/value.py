"""``OS::Heat::Value``: holds a value computed once, typed like a parameter."""

from __future__ import annotations

from typing import ClassVar

from convergence.template.properties import ANY, STRING, PropertySchema, TypeSchema

VALUE_TYPES = ("string", "number", "comma_delimited_list", "json", "boolean")


class ValueResource:
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::Value",
        properties={
            "value": PropertySchema(ANY, "The expression to hold.", required=True,
                                    update_allowed=True),
            "type": PropertySchema(STRING, "The type of the value.", allowed_values=VALUE_TYPES,
                                   update_allowed=True),
        },
        attributes=frozenset({"value"}),
        description="A value holder, used to compute data once and share it.",
    )
