"""``OS::Convergence::NodeGroup``: a heterogeneous group of named members, for clusters whose
nodes differ (flavors, availability zones, images) yet are managed as one group.

Every member is ``resource_def`` with its own overrides: ``members`` maps a member's name to
the properties that differ for it (``{"w-az2-1": {"flavor": "m1.large",
"availability_zone": "az2"}}``). Without ``count`` the members are exactly the map's keys:
adding, removing or changing one member is a change of its entry, and the group's nested
stack touches that member only (the others are defined alike, so nothing of theirs is
planned). With ``count``, the named members are joined by generated ones
(``name_prefix`` and a number never used before) up to ``count``; when the group shrinks,
the victims are the failed generated members first, then those ``removal_policies`` name,
then the newest; a name once removed is never used again.

``rolling_update`` (a property, or the resource's ``update_policy``) rolls a change of
definition through the members a batch at a time: ``max_unavailable`` (or
``max_batch_size``) members at once, ``pause_time`` seconds between batches; failed members
go first. Attributes as ``OS::Heat::ResourceGroup``'s (``refs``, ``refs_map``,
``attributes``, ``resource.<name>[.<attr>]``, any member attribute as a list), plus
``members``, the names in order.

Callers: the engine's steps, through the registry (entry point
``OS::Convergence::NodeGroup``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from convergence.plugins.base import ResourceFailure
from convergence.plugins.heat.groups import (
    REFS_MAP,
    REMOVED,
    Batches,
    GroupBase,
    name_order,
    present_names,
)
from convergence.plugins.heat.resource_group import removed_names, with_index
from convergence.template.nesting import UPDATE_POLICY
from convergence.template.properties import (
    INTEGER,
    LIST,
    MAP,
    NUMBER,
    STRING,
    PropertySchema,
    TypeSchema,
)


def _index(name: str, prefix: str) -> int | None:
    rest = name[len(prefix):] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


class NodeGroup(GroupBase):
    own_attributes: ClassVar[frozenset[str]] = frozenset({"members"})
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Convergence::NodeGroup",
        properties={
            "resource_def": PropertySchema(
                MAP, "What every member is, before its own overrides.", required=True,
                update_allowed=True,
                schema={"type": PropertySchema(STRING, "The members' type.", required=True),
                        "properties": PropertySchema(MAP, "The members' properties."),
                        "metadata": PropertySchema(MAP, "The members' metadata.")}),
            "members": PropertySchema(
                MAP, "Named members: name -> the properties that differ for it.",
                default={}, update_allowed=True),
            "count": PropertySchema(
                INTEGER, "How many members in all (named ones included); without it, the "
                "members are exactly the named ones.", min=0, update_allowed=True),
            "name_prefix": PropertySchema(
                STRING, "The names of generated members: this and a number.",
                default="node-"),
            "index_var": PropertySchema(
                STRING, "Replaced by each member's name in its definition.",
                default="%index%"),
            "removal_policies": PropertySchema(
                LIST, "Generated members to remove, by name or reference; their names are "
                "not used again.", default=[], update_allowed=True,
                item=PropertySchema(MAP, schema={"resource_list": PropertySchema(LIST)})),
            "rolling_update": PropertySchema(
                MAP, "Roll a change of definition through the members in batches.",
                update_allowed=True,
                schema={"max_batch_size": PropertySchema(INTEGER, min=1),
                        "max_unavailable": PropertySchema(INTEGER, min=1),
                        "pause_time": PropertySchema(NUMBER, min=0)}),
        },
        attributes=None,
        description="A group of named members, each the common definition with its own "
                    "overrides, as a nested stack.",
        generates_stack=True,
    )

    def membership(self, props: Mapping[str, Any], outputs: Mapping[str, Any],
                   present: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
        named = sorted((props.get("members") or {}), key=name_order)
        count = props.get("count")
        if count is None:
            return named, []
        count = int(count)
        if count < len(named):
            raise ResourceFailure(f"count ({count}) is less than the {len(named)} named "
                                  "members: name fewer members, or raise the count")
        prefix = str(props.get("name_prefix", "node-"))
        refs_map = outputs.get(REFS_MAP) or {}
        removed = removed_names(props, refs_map, list(outputs.get(REMOVED) or []))
        existing, failed = present_names(outputs, present)
        generated = sorted((n for n in existing
                            if n not in named and _index(n, prefix) is not None),
                           key=lambda n: _index(n, prefix) or 0)
        keep = [n for n in generated if n not in removed]
        wanted = count - len(named)
        if len(keep) > wanted:
            # Victims: the failed first, then the newest.
            ranked = sorted(keep, key=lambda n: (n not in failed, -(_index(n, prefix) or 0)))
            victims = set(ranked[:len(keep) - wanted])
            removed |= victims
            keep = [n for n in keep if n not in victims]
        used = [i for i in (_index(n, prefix) for n in [*existing, *refs_map, *removed])
                if i is not None]
        nxt = max(used, default=-1) + 1
        while len(keep) < wanted:
            name = f"{prefix}{nxt}"
            nxt += 1
            if name not in named and name not in removed:
                keep.append(name)
        return named + keep, sorted(removed, key=name_order)

    def member(self, props: Mapping[str, Any], name: str) -> dict[str, Any]:
        index_var = str(props.get("index_var", "%index%"))
        definition = dict(props["resource_def"])
        properties = dict(definition.get("properties") or {})
        overrides = (props.get("members") or {}).get(name) or {}
        if not isinstance(overrides, Mapping):
            raise ResourceFailure(f"members.{name}: the overrides of a member must be a map "
                                  "of properties")
        properties.update(overrides)
        member: dict[str, Any] = {"type": definition["type"]}
        if properties:
            member["properties"] = with_index(properties, index_var, name)
        if definition.get("metadata"):
            member["metadata"] = with_index(definition["metadata"], index_var, name)
        return member

    def rolling(self, props: Mapping[str, Any], existing: int) -> Batches | None:
        policy = props.get("rolling_update") or \
            (props.get(UPDATE_POLICY) or {}).get("rolling_update")
        if not isinstance(policy, Mapping):
            return None
        size = policy.get("max_unavailable") or policy.get("max_batch_size") or 1
        return Batches(int(size), float(policy.get("pause_time") or 0))

    def attributes(self, state: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        out = super().attributes(state, props)
        out["members"] = list((out.get(REFS_MAP) or {}).keys())
        return out
