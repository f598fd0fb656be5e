"""Resolving a template's values: a resource's properties, the stack's outputs, conditions.

Used by validation (with parameter values only, to evaluate conditions and check literal
properties), by the engine's step (to resolve one resource's properties from its direct
dependencies' stored data) and by the stack's output materialisation.

Resolution is lazy and local: resolving a resource touches only its own definition, the
parameters, and the data of the resources it names, fetched one at a time through
:class:`StackData`. What is not known yet (a parameter without a value, a resource not yet
created) raises :class:`UnknownValue`, which callers treat as "cannot say yet".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from convergence.template.errors import EVALUATION, FILE, REFERENCE, Path, TemplateError
from convergence.template.files import file_key
from convergence.template.functions.base import ELIDED, Call
from convergence.template.model import Template, inline_condition_key
from convergence.template.versions import TemplateVersion


class UnknownValue(Exception):
    """A value resolution needs is not known yet."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class StackData(Protocol):
    """Where the resolver finds other resources' data (the store, or a test's dict)."""

    def reference_id(self, resource: str) -> Any: ...

    def attribute(self, resource: str, name: str) -> Any: ...

    def attributes(self, resource: str) -> Mapping[str, Any]: ...


class NoStackData:
    """Before anything exists: every resource value is unknown."""

    def reference_id(self, resource: str) -> Any:
        raise UnknownValue(f"resource '{resource}'")

    def attribute(self, resource: str, name: str) -> Any:
        raise UnknownValue(f"resource '{resource}'")

    def attributes(self, resource: str) -> Mapping[str, Any]:
        raise UnknownValue(f"resource '{resource}'")


NO_DATA = NoStackData()


@dataclass(frozen=True, slots=True)
class StackIdentity:
    """The stack a template is being resolved for (its pseudo-parameters)."""

    name: str = ""
    id: str = ""
    project_id: str = ""
    region: str = "RegionOne"


class TemplateResolver:
    """Resolves values of one template for one stack. Cheap to build; holds no stack graph."""

    def __init__(
        self,
        template: Template,
        parameters: Mapping[str, Any],
        *,
        identity: StackIdentity | None = None,
        data: StackData = NO_DATA,
        facade: Mapping[str, Any] | None = None,
        availability_zones: tuple[str, ...] = (),
    ) -> None:
        self.template = template
        self.parameters = parameters
        self.identity = identity or StackIdentity()
        self.data = data
        self._facade = facade or {}
        self._azs = list(availability_zones)
        self._conditions: dict[str, bool] = {}
        self._evaluating: set[str] = set()

    # Resolver protocol -----------------------------------------------------------------------
    @property
    def version(self) -> TemplateVersion:
        return self.template.version

    def resolve(self, value: Any) -> Any:
        if isinstance(value, Call):
            return value.fn.evaluate(value, self)
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                r = self.resolve(v)
                if r is not ELIDED:
                    out[k] = r
            return out
        if isinstance(value, list):
            return [r for r in (self.resolve(v) for v in value) if r is not ELIDED]
        return value

    def parameter(self, name: str, path: Path) -> Any:
        pseudo = self._pseudo(name)
        if pseudo is not None:
            return pseudo
        if name in self.parameters:
            return self.parameters[name]
        if name in self.template.parameters:
            raise UnknownValue(f"parameter '{name}'")
        raise TemplateError.at(path, f"parameter '{name}' is not defined", REFERENCE)

    def _pseudo(self, name: str) -> str | None:
        ident = self.identity
        return {
            "OS::stack_name": ident.name, "AWS::StackName": ident.name,
            "OS::stack_id": ident.id, "AWS::StackId": ident.id,
            "OS::project_id": ident.project_id, "AWS::Region": ident.region,
        }.get(name)

    def reference(self, resource: str, path: Path) -> Any:
        if resource not in self.template.resources:
            # CFN Ref names parameters too.
            return self.parameter(resource, path)
        self._require_enabled(resource, path)
        return self.data.reference_id(resource)

    def attribute(self, resource: str, name: str, path: Path) -> Any:
        self._require_enabled(resource, path)
        return self.data.attribute(resource, name)

    def all_attributes(self, resource: str, path: Path) -> dict[str, Any]:
        self._require_enabled(resource, path)
        return dict(self.data.attributes(resource))

    def file(self, key: str, path: Path) -> str:
        found = file_key(self.template.files, key, self.template.location)
        if found is None:
            raise TemplateError.at(path, f"get_file: '{key}' is not in the files supplied "
                                   "with the template", FILE)
        return self.template.files[found]

    def condition(self, value: Any, path: Path) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return self.named_condition(value, path)
        if isinstance(value, Call):
            return bool(self.resolve(value))
        raise TemplateError.at(path, f"{value!r} is not a condition", EVALUATION)

    def facade(self, key: str, path: Path) -> Any:
        return self._facade.get(key)

    def availability_zones(self) -> list[str]:
        return list(self._azs)

    # Stack-level helpers ----------------------------------------------------------------------
    def named_condition(self, name: str, path: Path = ()) -> bool:
        if name in self._conditions:
            return self._conditions[name]
        if name not in self.template.conditions:
            raise TemplateError.at(path, f"condition '{name}' is not defined", REFERENCE)
        if name in self._evaluating:
            raise TemplateError.at(("conditions", name), "conditions refer to each other in "
                                   "a circle", REFERENCE)
        self._evaluating.add(name)
        try:
            value = self.condition(self.template.conditions[name], ("conditions", name))
        finally:
            self._evaluating.discard(name)
        self._conditions[name] = value
        return value

    def condition_values(self) -> dict[str, bool | None]:
        """Every named and inline condition: True, False, or None when not known yet."""
        values: dict[str, bool | None] = {}
        for name in self.template.conditions:
            try:
                values[name] = self.named_condition(name)
            except UnknownValue:
                values[name] = None
        for cond in self.template.inline_conditions:
            try:
                values[inline_condition_key(cond)] = self.condition(cond, cond.path)
            except UnknownValue:
                values[inline_condition_key(cond)] = None
        return values

    def is_enabled(self, condition: Any) -> bool:
        """Whether something guarded by ``condition`` (None: no guard) exists."""
        if condition is None:
            return True
        return self.condition(condition, ())

    def _require_enabled(self, resource: str, path: Path) -> None:
        defn = self.template.resources.get(resource)
        if defn is None:
            raise TemplateError.at(path, f"resource '{resource}' is not defined", REFERENCE)
        if defn.condition is not None and not self.condition(defn.condition, path):
            raise TemplateError.at(path, f"resource '{resource}' does not exist: its "
                                   "condition is false", REFERENCE)

    def properties(self, resource: str) -> dict[str, Any]:
        """The resolved properties of one resource."""
        value = self.resolve(self.template.resources[resource].properties)
        if not isinstance(value, dict):
            raise TemplateError.at(("resources", resource, "properties"),
                                   "properties must resolve to a map", EVALUATION)
        return value

    def output(self, name: str) -> Any:
        return self.resolve(self.template.outputs[name].value)

    def outputs(self) -> dict[str, Any]:
        """Every enabled output's value; one that cannot be resolved yet maps to None."""
        result: dict[str, Any] = {}
        for name, out in self.template.outputs.items():
            try:
                if not self.is_enabled(out.condition):
                    continue
                result[name] = self.output(name)
            except UnknownValue:
                result[name] = None
        return result
