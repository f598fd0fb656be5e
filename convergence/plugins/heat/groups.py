"""What every group of resources shares: a nested stack whose template the group writes,
brought to a new membership or definition in stages.

A group type (:class:`GroupBase`: ``OS::Heat::ResourceGroup``, ``OS::Convergence::NodeGroup``)
says who its members are and what each member's definition is; this writes the nested
template (the members, and outputs for what the parent's template reads of the group), and
walks it to the new state:

- at once, when nothing asks otherwise;
- in *rolling* stages when a definition changes and the group asks for batches (Heat's
  ``rolling_update``: ``max_batch_size``, ``min_in_service``, ``pause_time``; a node group's
  ``max_unavailable``): each stage's template gives the new definition to one more batch of
  members, the others keeping the one they have, so at most a batch is being changed at a
  time; new members come in the first stage, removed ones go in it;
- in *create* stages (Heat's ``batch_create``): the first batch of members, then one more
  batch per stage.

The stage under way is in the operation's state (the stage, how many, the old definition),
so a worker that dies between stages leaves the next to whoever polls next. Between stages
the node parks while the nested stack works and waits ``pause_time`` (a poll) only when asked
to: the next batch starts the moment the last one is done. Members a stage does not change
are left alone by the nested stack's update (nothing of theirs is planned).

Callers: the group plugins, through the engine's steps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from convergence.plugins.base import (
    CREATE,
    DELETE,
    ChildState,
    PluginContext,
    Progress,
    ResourceFailure,
)
from convergence.plugins.heat.nested import STACK_ID, STACK_NAME, NestedStackBase, stacks_of
from convergence.template.nesting import ATTRIBUTE_PATHS, ChildTemplate

REFS, REFS_MAP, REMOVED = "refs", "refs_map", "removed_rsrc_list"
# ``get_attr [group, <kind>, a]``: each member's ``a``, by name (a map) or in order (a list).
MAPS, LISTS = ("attributes", "outputs"), ("outputs_list",)
HOT_VERSION = "2018-08-31"


@dataclass(frozen=True, slots=True)
class Batches:
    """How a group changes its members: so many at a time, pausing between batches."""

    size: int
    pause: float = 0.0


def present_names(outputs: Mapping[str, Any],
                  present: Mapping[str, str] | None) -> tuple[list[str], set[str]]:
    """The members a group has now (its nested stack's resources; when they are not known,
    the outputs' ``refs_map``) in name order, and those of them that failed."""
    if present is None:
        names = list(outputs.get(REFS_MAP) or {})
        return sorted(names, key=name_order), set()
    return sorted(present, key=name_order), \
        {n for n, status in present.items() if status == "FAILED"}


def name_order(name: str) -> tuple[int, str]:
    """Numbers in numeric order, before any other name (in name order)."""
    return (int(name), "") if name.isdigit() else (1 << 62, name)


class GroupBase(NestedStackBase):
    """A group of resources as a nested stack (see the module)."""

    # Attributes the group computes itself rather than reads of its members.
    own_attributes: ClassVar[frozenset[str]] = frozenset()
    # True: the nested template offers ``refs`` and ``refs_map`` only when the parent's
    # template reads them. Each lists every member: for a group of a million they were half
    # of what its definition weighs, a million-entry pair written when it ends and read by
    # the parent, and copied into the group's attributes. A group type whose membership
    # reads them keeps them.
    refs_when_read: ClassVar[bool] = False

    # what a group type says -----------------------------------------------------------------
    def membership(self, props: Mapping[str, Any], outputs: Mapping[str, Any],
                   present: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
        """The members (in order) and the removed names (kept so they are never reused),
        given the nested stack's outputs as they are (``refs_map``, ``removed_rsrc_list``)
        and its resources as they are (``present``: name -> status; the FAILED ones are the
        first to go when the group shrinks)."""
        raise NotImplementedError

    def member(self, props: Mapping[str, Any], name: str) -> dict[str, Any]:
        """A member's definition (a resource snippet)."""
        raise NotImplementedError

    def rolling(self, props: Mapping[str, Any], existing: int) -> Batches | None:
        """How a change of definition rolls through ``existing`` members (None: at once)."""
        return None

    def batch_create(self, props: Mapping[str, Any]) -> Batches | None:
        """How the first members are made (None: all at once)."""
        return None

    def member_outputs(self, names: list[str],
                       paths: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """Outputs of the nested template a group type shapes itself (by attribute name:
        these replace the ones made the usual way)."""
        return {}

    # the nested template --------------------------------------------------------------------
    def template(self, ctx: PluginContext, props: Mapping[str, Any], names: Sequence[str],
                 removed: Sequence[str], old: Mapping[str, Any] | None = None,
                 renewed: frozenset[str] | None = None) -> ChildTemplate:
        """The nested template of ``names``; with ``old``, the members not in ``renewed``
        keep the definition ``old`` gives them (a stage of a rolling update)."""
        resources = {}
        for name in names:
            keep = old is not None and renewed is not None and name not in renewed
            resources[name] = self.member(old if keep and old is not None else props, name)
        paths = props.get(ATTRIBUTE_PATHS) or []
        refs = not self.refs_when_read or any(str(p[0]) in (REFS, REFS_MAP) for p in paths)
        outputs = group_outputs(list(names), sorted(removed, key=name_order), paths,
                                self.own_attributes, refs)
        outputs.update(self.member_outputs(list(names), paths))
        text = json.dumps({"heat_template_version": HOT_VERSION, "resources": resources,
                           "outputs": outputs})  # in member order
        base = ctx.child or ChildTemplate("")
        return ChildTemplate(text, base.files, base.environment, generated=True)

    def child(self, ctx: PluginContext, props: Mapping[str, Any],
              current: ChildState | None = None) -> ChildTemplate:
        names, removed = self.membership(props, current.outputs if current else {})
        return self.template(ctx, props, names, removed)

    # stages ---------------------------------------------------------------------------------
    def _stages(self, props: Mapping[str, Any], old: Mapping[str, Any] | None,
                names: list[str], existing: set[str],
                failed: Sequence[str] = ()) -> dict[str, Any]:
        """How the members are renewed: in ``order``, the first ``first`` at once, then
        ``size`` more at each of ``count`` stages (one stage: all at once)."""
        if old is None:
            batches = self.batch_create(props)
            if batches is None or not names:
                return {"order": names, "first": len(names), "size": 0, "count": 1}
            size = max(batches.size, 1)
            return {"order": names, "first": 0, "size": size,
                    "count": math.ceil(len(names) / size)}
        kept = [n for n in names if n in existing]
        changed = [n for n in kept if self.member(old, n) != self.member(props, n)]
        broken = set(failed)
        changed.sort(key=lambda n: n not in broken)  # failed members are renewed first
        batches = self.rolling(props, len(kept))
        fresh = [n for n in names if n not in existing]
        if batches is None or not changed:
            return {"order": names, "first": len(names), "size": 0, "count": 1}
        size = max(batches.size, 1)
        return {"order": fresh + changed, "first": len(fresh), "size": size,
                "count": math.ceil(len(changed) / size)}

    @staticmethod
    def _renewed(plan: Mapping[str, Any], stage: int) -> list[str]:
        order: list[str] = plan["order"]
        return order[:int(plan["first"]) + int(plan["size"]) * (stage + 1)]

    def _pause(self, props: Mapping[str, Any], old: Mapping[str, Any] | None) -> float:
        batches = self.batch_create(props) if old is None else self.rolling(props, 0)
        return batches.pause if batches is not None else 0.0

    def _run_stage(self, ctx: PluginContext, props: Mapping[str, Any],
                   plan: Mapping[str, Any], physical_id: str | None) -> Progress:
        """Ask the nested stack for stage ``plan["stage"]`` of ``plan``."""
        stage = int(plan["stage"])
        old = plan.get("old")
        renewed = self._renewed(plan, stage)
        if old is None:  # at once, or creating in batches: the members made so far
            names = renewed if int(plan["count"]) > 1 else plan["names"]
            child = self.template(ctx, props, names, plan["removed"])
        else:
            child = self.template(ctx, props, plan["names"], plan["removed"], old,
                                  frozenset(renewed))
        stacks = stacks_of(ctx)
        if physical_id is None:
            state = stacks.create(ctx, child, self.timeout(props))
        else:
            state = stacks.update(ctx, physical_id, child, self.timeout(props))
        return self._staged(ctx, state, props, {**plan, "template_id": state.template_id,
                                                "paused": False})

    def _staged(self, ctx: PluginContext, state: ChildState, props: Mapping[str, Any],
                plan: Mapping[str, Any]) -> Progress:
        if state.status == "IN_PROGRESS":
            return Progress.parked(dict(plan), state.id)
        return self._progress(ctx, state, props) if state.status == "FAILED" else \
            self._next(ctx, state, props, plan)

    def _next(self, ctx: PluginContext, state: ChildState, props: Mapping[str, Any],
              plan: Mapping[str, Any]) -> Progress:
        """A stage ended well: the next one (after the pause, if any), or the end."""
        stage = int(plan["stage"])
        if stage + 1 >= int(plan["count"]):
            return self._progress(ctx, state, props)
        pause = float(plan.get("pause") or 0.0)
        if pause > 0 and not plan.get("paused"):
            # The pause is timed from now; the polls until it is over only look at the clock.
            return Progress.pending(pause, {**plan, "paused": True,
                                            "resume_at": ctx.now() + pause}, state.id)
        return self._run_stage(ctx, props, {**plan, "stage": stage + 1}, state.id)

    # actions --------------------------------------------------------------------------------
    def create(self, ctx: PluginContext, props: Mapping[str, Any]) -> Progress:
        made = stacks_of(ctx).existing(ctx)
        if made is not None:
            # Made already (a create tried again after it failed, or after a crash): the
            # members it has count, its failed ones first to go, as in an update.
            return self.update(ctx, made.id, props, props)
        names, removed = self.membership(props, {})
        plan = {"stage": 0, **self._stages(props, None, names, set()),
                "names": names, "removed": removed, "old": None,
                "pause": self._pause(props, None)}
        return self._run_stage(ctx, props, plan, None)

    def update(self, ctx: PluginContext, physical_id: str | None, old: Mapping[str, Any],
               new: Mapping[str, Any]) -> Progress:
        if physical_id is None:
            return self.create(ctx, new)
        current = stacks_of(ctx).state(ctx, physical_id)
        if current is None or current.deleted:
            raise ResourceFailure(f"nested stack {physical_id} is gone")
        present = stacks_of(ctx).resources(ctx, physical_id)
        outputs = current.outputs
        del current  # its outputs may list every member: not held through the next stage
        if REFS_MAP not in outputs and by_reference(new, present, outputs.get(REMOVED)):
            # Members to remove named by reference, and no refs_map offered: read them.
            outputs = {**outputs, REFS_MAP: stacks_of(ctx).references(ctx, physical_id)}
        names, removed = self.membership(new, outputs, present)
        del outputs
        existing = set(present)
        failed = [n for n, status in present.items() if status == "FAILED"]
        stages = self._stages(new, old, names, existing, failed)
        plan = {"stage": 0, **stages, "names": names, "removed": removed,
                "old": dict(old) if stages["count"] > 1 else None,
                "pause": self._pause(new, old)}
        return self._run_stage(ctx, new, plan, physical_id)

    def poll(self, ctx: PluginContext, action: str, physical_id: str | None,
             props: Mapping[str, Any], state: Mapping[str, Any]) -> Progress:
        if action == DELETE or "count" not in state:
            return super().poll(ctx, action, physical_id, props, state)
        found = stacks_of(ctx).state(ctx, physical_id) if physical_id is not None else None
        if found is None or found.deleted:
            if action == CREATE and physical_id is None:
                return self.create(ctx, props)
            raise ResourceFailure(f"nested stack {physical_id} is gone")
        if found.status == "IN_PROGRESS":
            return Progress.parked(dict(state), found.id)
        if state.get("paused") or found.template_id != state.get("template_id"):
            if state.get("paused"):
                left = float(state.get("resume_at") or 0.0) - ctx.now()
                if left > 0:  # pausing between two stages
                    return Progress.pending(left, dict(state), found.id)
                return self._run_stage(ctx, props, {**state, "stage": int(state["stage"]) + 1},
                                       found.id)
            # The nested stack was last asked for something else: this stage again.
            return self._run_stage(ctx, props, state, found.id)
        return self._staged(ctx, found, props, state)

    def needs_replace(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return False

    def attributes(self, state: ChildState, props: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {STACK_ID: state.id, STACK_NAME: state.name}
        for key, value in state.outputs.items():
            kind, _, attribute = key.partition(".")
            if attribute and kind in MAPS + LISTS:
                out.setdefault(kind, {})[attribute] = value
            else:
                out[key] = value
        return out


def by_reference(props: Mapping[str, Any], present: Mapping[str, str],
                 removed: Sequence[str] | None) -> bool:
    """Whether ``removal_policies`` name something other than a member's name, present or
    removed before: a member's reference."""
    gone = set(removed or ())
    return any(str(item) not in present and str(item) not in gone
               for policy in props.get("removal_policies") or []
               for item in (policy or {}).get("resource_list") or [])


def group_outputs(names: list[str], removed: list[str], paths: Sequence[Sequence[Any]],
                  own: frozenset[str] = frozenset(), refs: bool = True) -> dict[str, Any]:
    """The nested template's outputs: the removed list, the members' references (``refs``:
    whether to), and what the parent's template reads of the group (``paths``), but the
    attributes the group makes itself (``own``)."""
    out: dict[str, Any] = {REMOVED: {"value": removed}}
    if refs:
        out[REFS] = {"value": [{"get_resource": n} for n in names]}
        out[REFS_MAP] = {"value": {n: {"get_resource": n} for n in names}}
    for path in paths:
        attribute, rest = str(path[0]), [str(p) for p in path[1:]]
        if attribute in (REFS, REFS_MAP, REMOVED, STACK_ID, STACK_NAME) or attribute in own:
            continue  # the group's own
        if attribute in MAPS:  # each member's attribute, by name
            if rest:
                out[f"{attribute}.{rest[0]}"] = {"value": {
                    n: {"get_attr": [n, rest[0]]} for n in names}}
        elif attribute in LISTS:  # each member's attribute, in order
            if rest:
                out[f"{attribute}.{rest[0]}"] = {"value": [
                    {"get_attr": [n, rest[0]]} for n in names]}
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
