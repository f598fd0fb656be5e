"""Whether a resource's definition is the same in two stack definitions: what lets an update
leave alone the resources it does not change.

A resource is the same when its snippet (type, properties, metadata, policies, dependencies,
as written), its effective type, its dependencies and the template's version are equal, and
whatever else the snippet reads is equal too: the parameter values (when it reads a
parameter), the conditions (when it has one, or uses ``if``), the files (when it reads one),
and, for a template resource, what its child is made from. Anything a snippet reads of other
resources (``get_resource``, ``get_attr``) is the same only if those resources are: that is
the planner's part (:mod:`convergence.engine.planning`), which leaves a resource alone only
when everything it depends on is left alone as well. Conservative: anything it cannot tell
counts as changed.

Callers: the planner. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from convergence.template.files import is_template_reference
from convergence.template.nesting import attribute_paths, template_digest
from convergence.template.validate import StackDefinition

# What a snippet may read besides other resources, and how it shows in its JSON text.
_READS_PARAMETERS = ('"get_param"', '"Ref"', '"Fn::FindInMap"')
_READS_CONDITIONS = ('"if"', '"Fn::If"', '"condition"', '"Condition"')
_READS_FILES = ('"get_file"',)


def _snippet(definition: StackDefinition, name: str) -> Any:
    raw = definition.template.raw
    resources = raw.get("resources", raw.get("Resources"))
    return resources.get(name) if isinstance(resources, Mapping) else None


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
    snippet = _snippet(new, name)
    if snippet is None or snippet != _snippet(old, name):
        return False
    text = json.dumps(snippet, sort_keys=True, default=str)
    if any(k in text for k in _READS_PARAMETERS) and \
            dict(old.parameters) != dict(new.parameters):
        return False
    if any(k in text for k in _READS_CONDITIONS) and \
            dict(old.conditions) != dict(new.conditions):
        return False
    if any(k in text for k in _READS_FILES) and \
            dict(old.template.files) != dict(new.template.files):
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
