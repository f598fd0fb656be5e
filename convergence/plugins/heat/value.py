"""``OS::Heat::Value``: holds a value computed once, typed like a parameter.

The engine's step calls :class:`ValueResource` with the resolved ``value``; the typed value is
stored as the ``value`` attribute, which other resources read with ``get_attr``. Nothing
exists outside the engine, so every action finishes at once and updates are always in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import PluginBase, PluginContext, Progress, ResourceFailure
from convergence.plugins.heat.none import owner_uuid
from convergence.template.errors import TemplateError
from convergence.template.parameters import ParameterSchema, coerce
from convergence.template.properties import ANY, STRING, PropertySchema, TypeSchema

VALUE_TYPES = ("string", "number", "comma_delimited_list", "json", "boolean")


def typed_value(value: Any, value_type: str | None) -> Any:
    """``value`` converted to ``value_type`` as a parameter of that type would be.

    Raises :class:`ResourceFailure` when it cannot be: the value is often the result of
    functions (``get_attr``, ``str_replace``), so this is only known once it is resolved.
    """
    if value_type is None:
        return value  # Heat: no declared type, anything goes
    if value_type == "string" and isinstance(value, dict | list):
        # A string parameter would take str() of it, a Python repr nobody wants in a
        # template's output; Heat's String property refuses maps and lists as well.
        raise ResourceFailure(f"Property value: must be a string, not a "
                              f"{'map' if isinstance(value, dict) else 'list'}")
    try:
        return coerce(ParameterSchema("value", value_type), value, ("value",))
    except TemplateError as exc:
        raise ResourceFailure(f"Property {exc.problems[0]}") from None


class ValueResource(PluginBase):
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

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        value = typed_value(props.get("value"), props.get("type"))
        return Progress.finished(owner_uuid(ctx.owner), {"value": value})

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        value = typed_value(new.get("value"), new.get("type"))
        return Progress.finished(physical_id or owner_uuid(ctx.owner), {"value": value})
