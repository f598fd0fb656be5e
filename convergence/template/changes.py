"""Whether a resource's definition is the same in two stack definitions: what lets an update
leave alone the resources it does not change.

A resource is the same when its snippet (type, properties, metadata, policies, dependencies,
as parsed: the document itself is not kept), its effective type, its dependencies and the
template's version are equal, and whatever else the snippet reads is equal too: the
parameter values (when it reads a parameter), the conditions (when it has one, or uses
``if``), the files (when it reads one), and, for a template resource, what its child is made
from. Anything a snippet reads of other resources (``get_resource``, ``get_attr``) is the
same only if those resources are: that is the planner's part
(:mod:`convergence.engine.planning`), which leaves a resource alone only when everything it
depends on is left alone as well. Conservative: anything it cannot tell counts as changed.

Callers: the planner. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from convergence.template.files import is_template_reference
from convergence.template.functions.base import Call
from convergence.template.model import ResourceDefinition
from convergence.template.nesting import attribute_paths, template_digest
from convergence.template.validate import StackDefinition

# What a snippet may read besides other resources: the functions that read each.
_READS_PARAMETERS = frozenset({"get_param", "Ref", "Fn::FindInMap"})
_READS_CONDITIONS = frozenset({"if", "Fn::If"})
_READS_FILES = frozenset({"get_file"})


def _calls_in(value: Any, found: set[str]) -> set[str]:
    """The names of the functions called anywhere in ``value`` (added to ``found``)."""
    if isinstance(value, Call):
        found.add(value.name)
        _calls_in(value.args, found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _calls_in(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _calls_in(item, found)
    return found


def _called(defn: ResourceDefinition) -> set[str]:
    found: set[str] = set()
    for value in (defn.properties, defn.metadata, defn.update_policy, defn.deletion_policy,
                  defn.external_id, defn.condition):
        _calls_in(value, found)
    return found


def same_resource(old: StackDefinition, new: StackDefinition, name: str, *,
                  generates_stack: bool = False) -> bool:
    """Whether resource ``name`` is defined alike in ``old`` and ``new`` (see the module).
    ``generates_stack``: its type writes its own nested stack (a group), which reads what
    the template reads of it too."""
    if old is new:
        return True
    if old.template.version.name != new.template.version.name:
        return False
    rtype = new.resource_types.get(name)
    if rtype is None or old.resource_types.get(name) != rtype:
        return False
    if old.dependencies.get(name) != new.dependencies.get(name):
        return False
    # The snippet as parsed: the same as written, up to spellings that mean the same (a
    # single name or a list of one in depends_on, a default deletion policy left out). The
    # parsed template keeps no copy of the document it came from.
    snippet = new.template.resources.get(name)
    if snippet is None or snippet != old.template.resources.get(name):
        return False
    called = _called(snippet)
    if called & _READS_PARAMETERS and dict(old.parameters) != dict(new.parameters):
        return False
    if (called & _READS_CONDITIONS or snippet.condition is not None) and \
            dict(old.conditions) != dict(new.conditions):
        return False
    if called & _READS_FILES and dict(old.template.files) != dict(new.template.files):
        return False
    if is_template_reference(rtype):
        try:
            if template_digest(old, name) != template_digest(new, name):
                return False
        except KeyError:
            return False
    if generates_stack:
        if attribute_paths(old, name) != attribute_paths(new, name):
            return False
        if (old.scaling.get("capacity") or {}).get(name) != \
                (new.scaling.get("capacity") or {}).get(name):
            return False
        if dict(old.template.files) != dict(new.template.files) or \
                old.environment.resource_registry != new.environment.resource_registry:
            return False
    return True
