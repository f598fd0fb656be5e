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
nested template offers, ``refs`` and ``refs_map`` included (a group of a million members
whose template reads neither does not carry two million-entry lists through every update;
removing members by reference then reads the references of the nested stack's resources).

Callers: the engine's steps, through the registry (entry point ``OS::Heat::ResourceGroup``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from convergence.plugins.heat.groups import (
    REFS_MAP,
    REMOVED,
    Batches,
    GroupBase,
    name_order,
    present_names,
)
from convergence.template.nesting import UPDATE_POLICY
from convergence.template.properties import (
    INTEGER,
    LIST,
    MAP,
    STRING,
    PropertySchema,
    TypeSchema,
)


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


class ResourceGroup(GroupBase):
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

    refs_when_read: ClassVar[bool] = True

    def membership(self, props: Mapping[str, Any], outputs: Mapping[str, Any],
                   present: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
        refs_map = outputs.get(REFS_MAP) or {}
        removed = removed_names(props, refs_map, list(outputs.get(REMOVED) or []))
        count = int(props.get("count", 1))
        names = member_names(count, removed)
        # Shrinking: the failed members go first (their names join the removed list), then
        # the last ones, as Heat removes them.
        existing, failed = present_names(outputs, present)
        existing = [n for n in existing if n not in removed]
        excess = len(existing) - count
        if excess > 0:
            victims = [n for n in existing if n in failed][:excess]
            if victims:
                removed |= set(victims)
                names = member_names(count, removed)
        return names, sorted(removed, key=name_order)

    def member(self, props: Mapping[str, Any], name: str) -> dict[str, Any]:
        index_var = str(props.get("index_var", "%index%"))
        definition = dict(props["resource_def"])
        member: dict[str, Any] = {"type": definition["type"]}
        if definition.get("properties"):
            member["properties"] = with_index(definition["properties"], index_var, name)
        if definition.get("metadata"):
            member["metadata"] = with_index(definition["metadata"], index_var, name)
        return member

    def rolling(self, props: Mapping[str, Any], existing: int) -> Batches | None:
        policy = (props.get(UPDATE_POLICY) or {}).get("rolling_update")
        if not isinstance(policy, Mapping):
            return None
        size = int(policy.get("max_batch_size", 1) or 1)
        in_service = int(policy.get("min_in_service", 0) or 0)
        if in_service and existing:
            size = min(size, max(existing - in_service, 1))
        return Batches(size, float(policy.get("pause_time", 0) or 0))

    def batch_create(self, props: Mapping[str, Any]) -> Batches | None:
        policy = (props.get(UPDATE_POLICY) or {}).get("batch_create")
        if not isinstance(policy, Mapping):
            return None
        return Batches(int(policy.get("max_batch_size", 1) or 1),
                       float(policy.get("pause_time", 0) or 0))
