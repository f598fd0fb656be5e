"""``OS::Heat::ResourceGroup``: ``count`` copies of one resource definition, as a nested stack
whose template the group writes.

Members are named ``"0"``, ``"1"``, ...: the first ``count`` numbers not in the group's
removed list (``removed_rsrc_list``), so a member removed from the middle by
``removal_policies`` (by name or by reference) is never made again under its name, and the
others keep theirs. ``removal_policies_mode`` ``append`` (the default) adds the named members
to the removed list, ``update`` makes the list just those. ``index_var`` (``%index%``) in the
definition is each member's name. The nested stack's update only touches the members whose
definition changed: the rest are left as they are.

Its attributes (materialised from the nested stack's outputs when it completes): ``refs``,
``refs_map``, ``removed_rsrc_list``, ``attributes`` (``get_attr [g, attributes, a]``: each
member's ``a`` by name), ``resource.<n>`` and ``resource.<n>.<a>``, and any other name as the
list of the members' attribute of that name, in member order. The engine hands the group the
``get_attr`` paths its template reads of it (``_attribute_paths``): those are the outputs the
nested template offers.

Callers: the engine's steps, through the registry (entry point ``OS::Heat::ResourceGroup``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from convergence.plugins.base import ChildState, PluginContext, Progress
from convergence.plugins.heat.nested import STACK_ID, STACK_NAME, NestedStackBase, stacks_of
from convergence.template.nesting import ATTRIBUTE_PATHS, ChildTemplate
from convergence.template.properties import (
    INTEGER,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)

REFS, REFS_MAP, REMOVED = "refs", "refs_map", "removed_rsrc_list"
SPECIAL = frozenset({REFS, REFS_MAP, REMOVED, "attributes", STACK_ID, STACK_NAME})
HOT_VERSION = "2018-08-31"


def member_names(count: int, removed: set[str]) -> list[str]:
    """The first ``count`` numbers (as names) not removed."""
    names: Iterator[str] = (str(i) for i in itertools.count())
    return list(itertools.islice((n for n in names if n not in removed), max(count, 0)))


def with_index(value: Any, index_var: str, name: str) -> Any:
    """``value`` with ``index_var`` replaced by the member's name in every string."""
    if isinstance(value, str):
        return value.replace(index_var, name) if index_var else value
    if isinstance(value, list):
        return [with_index(v, index_var, name) for v in value]
    if isinstance(value, dict):
        return {with_index(k, index_var, name): with_index(v, index_var, name)
                for k, v in value.items()}
    return value


def removed_names(props: Mapping[str, Any], refs_map: Mapping[str, Any],
                  removed_before: list[str]) -> set[str]:
    """The removed list after applying ``removal_policies`` (names, or members' references,
    resolved against ``refs_map``)."""
    named: set[str] = set()
    by_ref = {str(ref): name for name, ref in refs_map.items()}
    for policy in props.get("removal_policies") or []:
        for item in (policy or {}).get("resource_list") or []:
            key = str(item)
            named.add(by_ref.get(key, key) if key not in refs_map else key)
    if props.get("removal_policies_mode", "append") == "update":
        return named
    return set(removed_before) | named


class ResourceGroup(NestedStackBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::ResourceGroup",
        properties={
            "count": PropertySchema(INTEGER, "How many members.", default=1, min=0,
                                    update_allowed=True),
            "index_var": PropertySchema(STRING, "Replaced by each member's index in its "
                                        "definition.", default="%index%"),
            "resource_def": PropertySchema(
                MAP, "The members' definition.", required=True, update_allowed=True,
                schema={"type": PropertySchema(STRING, "The members' type.", required=True),
                        "properties": PropertySchema(MAP, "The members' properties."),
                        "metadata": PropertySchema(MAP, "The members' metadata.")}),
            "removal_policies": PropertySchema(
                LIST, "Members to remove, by name or reference; their names are not used "
                "again.", default=[], update_allowed=True,
                item=PropertySchema(MAP, schema={"resource_list": PropertySchema(LIST)})),
            "removal_policies_mode": PropertySchema(
                STRING, "append: the named members join the removed list; update: they "
                "make it.", default="append", allowed_values=("append", "update"),
                update_allowed=True),
        },
        attributes=None,
        description="A group of identical resources, as a nested stack.",
        generates_stack=True,
    )

    # the nested template --------------------------------------------------------------------
    def child(self, ctx: PluginContext, props: Mapping[str, Any],
              current: ChildState | None = None) -> ChildTemplate:
        outputs = current.outputs if current is not None else {}
        removed = removed_names(props, outputs.get(REFS_MAP) or {},
                                list(outputs.get(REMOVED) or []))
        names = member_names(int(props.get("count", 1)), removed)
        index_var = str(props.get("index_var", "%index%"))
        definition = dict(props["resource_def"])
        resources: dict[str, Any] = {}
        for name in names:
            member: dict[str, Any] = {"type": definition["type"]}
            if definition.get("properties"):
                member["properties"] = with_index(definition["properties"], index_var, name)
            if definition.get("metadata"):
                member["metadata"] = with_index(definition["metadata"], index_var, name)
            resources[name] = member
        outputs_doc = _outputs(names, sorted(removed, key=_order),
                               props.get(ATTRIBUTE_PATHS) or [])
        text = json.dumps({"heat_template_version": HOT_VERSION, "resources": resources,
                           "outputs": outputs_doc}, sort_keys=True)
        base = ctx.child or ChildTemplate("")
        return ChildTemplate(text, base.files, base.environment)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        stacks = stacks_of(ctx)
        current = stacks.state(ctx, physical_id)
        state = stacks.update(ctx, physical_id, self.child(ctx, new, current))
        return self._progress(ctx, state, new)

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return False

    def attributes(self, state: ChildState, props: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {STACK_ID: state.id, STACK_NAME: state.name}
        members: dict[str, Any] = {}
        for key, value in state.outputs.items():
            if key.startswith("attributes."):
                members[key[len("attributes."):]] = value
            else:
                out[key] = value
        if members:
            out["attributes"] = members
        return out


def _order(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 62, name)


def _outputs(names: list[str], removed: list[str],
             paths: list[list[Any]]) -> dict[str, Any]:
    """The nested template's outputs: references, the removed list, and what the parent's
    template reads of the group (``paths``)."""
    out: dict[str, Any] = {
        REFS: {"value": [{"get_resource": n} for n in names]},
        REFS_MAP: {"value": {n: {"get_resource": n} for n in names}},
        REMOVED: {"value": removed},
    }
    for path in paths:
        attribute, rest = str(path[0]), [str(p) for p in path[1:]]
        if attribute in (REFS, REFS_MAP, REMOVED, STACK_ID, STACK_NAME):
            continue
        if attribute == "attributes":
            if rest:
                out[f"attributes.{rest[0]}"] = {"value": {
                    n: {"get_attr": [n, rest[0]]} for n in names}}
        elif attribute.startswith("resource."):
            member, _, inner = attribute[len("resource."):].partition(".")
            if member not in names:
                continue
            if inner:
                out[attribute] = {"value": {"get_attr": [member, inner]}}
            elif rest:
                out[attribute] = {"value": {rest[0]: {"get_attr": [member, rest[0]]}}}
            else:
                out[attribute] = {"value": {"get_resource": member}}
        else:
            out[attribute] = {"value": [{"get_attr": [n, attribute]} for n in names]}
    return out
