"""``OS::Heat::AutoScalingGroup`` and ``OS::Heat::ScalingPolicy``, as Heat has them.

The group is a nested stack of ``resource`` copies, between ``min_size`` and ``max_size``:
``desired_capacity`` when the template gives one, else the size it has (at first
``min_size``); a scaling policy's signal sets its size as a new generation of the stack (the
size is part of the stack's desired state: ``convergence.services.scaling``), which the group
reads here (``_capacity``). Members are named by a number never used twice; when the group
shrinks the failed members go first, then the oldest, as Heat's. ``rolling_updates``
(``min_in_service``, ``max_batch_size``, ``pause_time``) rolls a new ``resource`` through the
members in batches. Attributes: ``current_size``, ``refs``, ``refs_map``, ``outputs`` and
``outputs_list`` (``get_attr [g, outputs, a]``: each member's ``a`` by name, or in order).

A policy is a resource with nothing behind it but its URLs: ``signal_url`` (Heat's signal
API, where a ``POST`` scales its group) and ``alarm_url`` (the same URL, which an alarm
service may be given). :func:`new_capacity` is Heat's arithmetic of an adjustment.

Callers: the engine's steps (entry points), and ``convergence.services.scaling``, which reads
:func:`new_capacity` and the schemas' property names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

from convergence.plugins.base import (
    PluginBase,
    PluginContext,
    PluginHost,
    Progress,
    ResourceFailure,
)
from convergence.plugins.heat.groups import (
    REFS,
    REFS_MAP,
    REMOVED,
    Batches,
    GroupBase,
    name_order,
    present_names,
)
from convergence.plugins.heat.none import owner_uuid
from convergence.plugins.heat.resource_group import removed_names
from convergence.plugins.software_port import software_backend
from convergence.template.nesting import CAPACITY
from convergence.template.properties import (
    INTEGER,
    MAP,
    NUMBER,
    STRING,
    PropertySchema,
    TypeSchema,
)

CHANGE, EXACT, PERCENT = ("change_in_capacity", "exact_capacity",
                          "percent_change_in_capacity")
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8004"


def new_capacity(current: int, adjustment: float, adjustment_type: str,
                 min_adjustment_step: int | None, minimum: int, maximum: int) -> int:
    """The size an adjustment gives a group of ``current`` members, within its bounds
    (Heat's arithmetic: a percentage rounds away from zero under one member, toward zero
    above, and moves by at least ``min_adjustment_step``)."""
    if adjustment_type == CHANGE:
        wanted = current + int(adjustment)
    elif adjustment_type == EXACT:
        wanted = int(adjustment)
    else:
        delta = current * adjustment / 100.0
        if abs(delta) < 1.0:
            rounded = int(math.ceil(delta) if delta > 0 else math.floor(delta))
        else:
            rounded = int(math.floor(delta) if delta > 0 else math.ceil(delta))
        if min_adjustment_step and min_adjustment_step > abs(rounded):
            rounded = min_adjustment_step if rounded > 0 else -min_adjustment_step
        wanted = current + rounded
    return max(minimum, min(maximum, wanted))


def group_size(props: Mapping[str, Any], current: int | None) -> int:
    """The size a group's properties ask for: what a policy set, else its
    ``desired_capacity``, else the size it has (at first ``min_size``), within bounds."""
    minimum, maximum = int(props.get("min_size", 0)), int(props.get("max_size", 0))
    if props.get(CAPACITY) is not None:
        wanted = int(props[CAPACITY])
    elif props.get("desired_capacity") is not None:
        wanted = int(props["desired_capacity"])
    else:
        wanted = current if current is not None else minimum
    return max(minimum, min(maximum, wanted))


class AutoScalingGroup(GroupBase):
    own_attributes: ClassVar[frozenset[str]] = frozenset({"current_size"})
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::AutoScalingGroup",
        properties={
            "min_size": PropertySchema(INTEGER, "The fewest members.", required=True, min=0,
                                       update_allowed=True),
            "max_size": PropertySchema(INTEGER, "The most members.", required=True, min=0,
                                       update_allowed=True),
            "desired_capacity": PropertySchema(INTEGER, "How many members to have now.",
                                               update_allowed=True),
            "cooldown": PropertySchema(INTEGER, "Seconds after a scaling before the next "
                                       "(for policies that give none).", update_allowed=True),
            "resource": PropertySchema(MAP, "What each member is (a resource definition).",
                                       required=True, update_allowed=True),
            "rolling_updates": PropertySchema(
                MAP, "Roll a new definition through the members in batches.",
                update_allowed=True,
                schema={"min_in_service": PropertySchema(INTEGER, min=0, default=0),
                        "max_batch_size": PropertySchema(INTEGER, min=1, default=1),
                        "pause_time": PropertySchema(NUMBER, min=0, default=0)}),
        },
        attributes=frozenset({"outputs", "outputs_list", "current_size", REFS, REFS_MAP}),
        description="A group whose size scaling policies change, as a nested stack.",
        generates_stack=True,
    )

    def membership(self, props: Mapping[str, Any], outputs: Mapping[str, Any],
                   present: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
        if int(props.get("min_size", 0)) > int(props.get("max_size", 0)):
            raise ResourceFailure("min_size can not be greater than max_size")
        refs_map = outputs.get(REFS_MAP) or {}
        removed = removed_names({}, refs_map, list(outputs.get(REMOVED) or []))
        existing, failed = present_names(outputs, present)
        existing = [n for n in existing if n not in removed]
        known = present is not None or bool(refs_map)
        size = group_size(props, len(existing) if known else None)
        if len(existing) > size:
            # The failed go first, then the oldest (the lowest numbers), as in Heat.
            ranked = sorted(existing, key=lambda n: (n not in failed, name_order(n)))
            victims = set(ranked[:len(existing) - size])
            removed |= victims
            existing = [n for n in existing if n not in victims]
        used = [int(n) for n in [*existing, *refs_map, *removed] if n.isdigit()]
        nxt = max(used, default=-1) + 1
        while len(existing) < size:
            existing.append(str(nxt))
            nxt += 1
        return existing, sorted(removed, key=name_order)

    def member(self, props: Mapping[str, Any], name: str) -> dict[str, Any]:
        definition = dict(props["resource"])
        if "type" not in definition:
            raise ResourceFailure("resource: a member's definition needs its type")
        return {k: v for k, v in definition.items()
                if k in ("type", "properties", "metadata", "depends_on", "deletion_policy")}

    def rolling(self, props: Mapping[str, Any], existing: int) -> Batches | None:
        policy = props.get("rolling_updates")
        if not isinstance(policy, Mapping):
            return None
        size = int(policy.get("max_batch_size") or 1)
        in_service = int(policy.get("min_in_service") or 0)
        if in_service and existing:
            size = min(size, max(existing - in_service, 1))
        return Batches(size, float(policy.get("pause_time") or 0))

    def attributes(self, state: Any, props: Mapping[str, Any]) -> dict[str, Any]:
        out = super().attributes(state, props)
        out["current_size"] = len(out.get(REFS) or [])
        return out


def _public_url(host: PluginHost) -> str:
    """The API's public address when the runtime keeps no software backend (which knows it)."""
    return (host.environ.get("CONVERGENCE_PUBLIC_URL") or DEFAULT_PUBLIC_URL).rstrip("/")


class ScalingPolicy(PluginBase):
    schema: ClassVar[TypeSchema] = TypeSchema(
        name="OS::Heat::ScalingPolicy",
        properties={
            "auto_scaling_group_id": PropertySchema(
                STRING, "The group this policy scales.", required=True),
            "adjustment_type": PropertySchema(
                STRING, "How scaling_adjustment is read.", required=True,
                allowed_values=(CHANGE, EXACT, PERCENT), update_allowed=True),
            "scaling_adjustment": PropertySchema(
                NUMBER, "The size to change by, or to.", required=True, update_allowed=True),
            "cooldown": PropertySchema(
                NUMBER, "Seconds after a scaling before this policy scales again.",
                update_allowed=True),
            "min_adjustment_step": PropertySchema(
                INTEGER, "The least a percentage adjustment moves the size by.", min=0,
                update_allowed=True),
        },
        attributes=frozenset({"alarm_url", "signal_url"}),
        description="Scales an autoscaling group when signalled.",
    )
    backends: ClassVar[Mapping[str, Any]] = {"public_url": _public_url,
                                             "software": software_backend}

    def _attributes(self, ctx: PluginContext) -> dict[str, Any]:
        software = ctx.backends.get("software")
        base = software.public_url if software is not None else \
            ctx.backends.get("public_url") or DEFAULT_PUBLIC_URL
        url = (f"{base}/v1/{quote(ctx.stack_tenant, safe='')}/stacks/"
               f"{quote(ctx.stack_name, safe='')}/{quote(ctx.stack_id, safe='')}/resources/"
               f"{quote(ctx.resource_name, safe='')}/signal")
        # signal_url takes a token, as Heat's; alarm_url is pre-signed (an alarm service
        # calls it with no token), as Heat's CFN one.
        alarm = software.signed_url(ctx, "signal") if software is not None else url
        return {"signal_url": url, "alarm_url": alarm}

    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        return Progress.finished(owner_uuid(ctx.owner), self._attributes(ctx))

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        return Progress.finished(physical_id or owner_uuid(ctx.owner), self._attributes(ctx))
