"""The parsed template: frozen values that the rest of the engine reads.

Built by ``parse`` from a document; read by validation, the resolver, the planner and the API.
Values inside (properties, metadata, outputs, conditions) are plain data with
:class:`~convergence.template.functions.base.Call` objects where intrinsic functions stand.
Every resource definition carries the references it makes, collected while parsing, so that
building a dependency graph never walks the template again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from convergence.template.errors import Path
from convergence.template.parameters import ParameterSchema
from convergence.template.versions import TemplateVersion


@dataclass(frozen=True, slots=True)
class Guard:
    """A reference inside one branch of an ``if``: it holds only when ``condition`` is ``when``."""

    condition: Any
    when: bool


@dataclass(frozen=True, slots=True)
class Reference:
    """A use of another resource (``get_resource``, ``get_attr``, ``Ref``, ``Fn::GetAtt``)."""

    target: str
    path: Path
    guards: tuple[Guard, ...] = ()
    attribute: Any = None  # get_attr's attribute name (may be a Call), None for get_resource
    is_attribute: bool = False


@dataclass(frozen=True, slots=True)
class ResourceDefinition:
    """One entry of the ``resources`` section."""

    name: str
    type: str
    properties: Any = field(default_factory=dict)
    metadata: Any = None
    depends_on: tuple[str, ...] = ()
    update_policy: Any = None
    deletion_policy: Any = "Delete"
    condition: Any = None  # None: always exists
    external_id: Any = None
    references: tuple[Reference, ...] = ()

    def requires(self, enabled: Mapping[str, bool | None] | None = None) -> frozenset[str]:
        """Names this resource depends on; ``enabled`` gives known condition values."""
        names = set(self.depends_on)
        for ref in self.references:
            if ref.guards and enabled is not None and not guards_hold(ref.guards, enabled):
                continue
            names.add(ref.target)
        return frozenset(names)


def guards_hold(guards: tuple[Guard, ...], enabled: Mapping[str, bool | None]) -> bool:
    for guard in guards:
        cond = guard.condition
        value: bool | None
        if isinstance(cond, bool):
            value = cond
        elif isinstance(cond, str):
            value = enabled.get(cond)
        else:
            value = enabled.get(_inline_key(cond))
        if value is not None and value is not guard.when:
            return False
    return True


def _inline_key(condition: Any) -> str:
    """Inline condition expressions are evaluated ahead and stored under their repr."""
    return f"<inline {condition!r}>"


inline_condition_key = _inline_key


@dataclass(frozen=True, slots=True)
class OutputDefinition:
    """One entry of the ``outputs`` section."""

    name: str
    value: Any
    description: str | None = None
    condition: Any = None
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class ParameterGroup:
    label: str | None
    description: str | None
    parameters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AttributeUse:
    """A literal ``get_attr`` attribute, checked against the target's type during validation."""

    resource: str
    attribute: str
    path: Path
    # The literal path after the attribute name (``get_attr [r, attributes, name]``: name);
    # a part that is not a literal ends it.
    rest: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Template:
    """A parsed, structurally valid HOT template (weakly referable: a process's cache of
    parsed templates keeps only those a definition in use holds)."""

    version: TemplateVersion
    description: str | None
    parameter_groups: tuple[ParameterGroup, ...]
    parameters: Mapping[str, ParameterSchema]
    resources: Mapping[str, ResourceDefinition]
    outputs: Mapping[str, OutputDefinition]
    conditions: Mapping[str, Any]
    files: Mapping[str, str]
    location: str | None = None
    attribute_uses: tuple[AttributeUse, ...] = ()
    inline_conditions: tuple[Any, ...] = ()
