"""From a document to a :class:`~convergence.template.model.Template`, checking as it goes.

Called by the validation entry points and by anything that stores or plans a template. One walk
over the document turns intrinsic functions into calls, checks each call's arguments and the
names it refers to (parameters, resources, conditions, files), and records references for the
dependency graph. Every problem found is collected; nothing is accepted half-way: the result is
a Template, or a TemplateError listing all problems with their paths.

What needs more than the document (resource types, parameter values, nested templates, cycles
under the chosen conditions) is checked by ``validate``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from convergence.template import structure
from convergence.template.collector import collector_paused
from convergence.template.dependencies import condition_cycle
from convergence.template.errors import (
    FILE,
    FUNCTION,
    REFERENCE,
    STRUCTURE,
    VERSION,
    Path,
    Problems,
    TemplateError,
)
from convergence.template.files import file_key
from convergence.template.functions.base import Call, FunctionDef
from convergence.template.model import (
    AttributeUse,
    Guard,
    OutputDefinition,
    ParameterGroup,
    Reference,
    ResourceDefinition,
    Template,
)
from convergence.template.parameters import ParameterSchema, parse_parameters
from convergence.template.source import DEFAULT_LIMITS, Limits, load_tree
from convergence.template.versions import (
    ALL_FUNCTION_NAMES,
    FIRST_WITH_OUTPUT_KEY,
    FIRST_WITH_RESOURCE_KEY,
    FIRST_WITH_SECTION,
    VERSIONS,
    TemplateVersion,
    deletion_policies,
    lookup_version,
)

_CFN_KEYS = ("AWSTemplateFormatVersion", "HeatTemplateFormatVersion")
_CONDITION_ONLY = frozenset({"equals", "not", "and", "or"})
_FUNCTION_PREFIXES = ("get_", "str_", "list_", "map_")
# isinstance takes a tuple of types faster than a union: these are asked of every value.
_CONTAINERS = (dict, list)
_MAP_OR_CALL = (dict, Call)



class _Parser:
    """Walks one template; implements the CheckContext that function checks talk to."""

    def __init__(self, version: TemplateVersion, problems: Problems, files: Mapping[str, str],
                 location: str | None, parameters: Mapping[str, Any],
                 resources: Mapping[str, Any], conditions: Mapping[str, Any],
                 owned: bool = False) -> None:
        self._version = version
        self._owned = owned  # the document may be changed in place (see parse_collecting)
        self.problems = problems
        self.files = files
        self.location = location
        self.parameter_names = parameters
        self.resource_names = resources
        self.condition_names = conditions
        self._section = ""
        self._owner: str | None = None
        self.references: list[Reference] = []
        self.attribute_uses: list[AttributeUse] = []
        self.inline_conditions: list[Any] = []
        self.bad_calls: set[Path] = set()  # where a function error was already reported
        self.deletion_policies = deletion_policies(version)

    # CheckContext ---------------------------------------------------------------------------
    @property
    def version(self) -> TemplateVersion:
        return self._version

    @property
    def section(self) -> str:
        return self._section

    @property
    def owner(self) -> str | None:
        return self._owner

    def error(self, path: Path, message: str, kind: str = FUNCTION) -> None:
        self.problems.add(path, message, kind)

    def has_parameter(self, name: str) -> bool:
        return name in self.parameter_names

    def has_resource(self, name: str) -> bool:
        return name in self.resource_names

    def has_condition(self, name: str) -> bool:
        return name in self.condition_names

    def check_file(self, key: str, path: Path) -> None:
        if file_key(self.files, key, self.location) is None:
            self.error(path, f"get_file: '{key}' is not in the files supplied with the "
                       "template", FILE)

    def check_attribute(self, resource: str, attribute: Any, path: Path,
                        rest: Sequence[Any] = ()) -> None:
        if isinstance(attribute, str):
            literal: list[Any] = []
            for part in rest:
                if not isinstance(part, str | int):
                    break
                literal.append(part)
            self.attribute_uses.append(AttributeUse(resource, attribute, path, tuple(literal)))
        elif not isinstance(attribute, Call):
            self.error(path, "get_attr: the attribute name must be a string", FUNCTION)

    def check_condition(self, value: Any, path: Path) -> None:
        if isinstance(value, bool | Call):
            return
        if isinstance(value, str):
            if value not in self.condition_names:
                hint = _suggest(value, self.condition_names)
                self.error(path, f"condition '{value}' is not defined{hint}", REFERENCE)
            return
        self.error(path, "a condition must be a condition name, a boolean or a condition "
                   "function", FUNCTION)

    # The walk -------------------------------------------------------------------------------
    def enter(self, section: str, owner: str | None) -> None:
        self._section, self._owner = section, owner

    def parse(self, value: Any, path: Path, guards: tuple[Guard, ...] = (),
              conditions: bool = False) -> Any:
        """``value`` with calls where functions stand. A map or list without calls is
        returned as it is: parsed values share what they do not change with the document.
        One that holds calls is a copy, or in a document the parser owns, changed in place."""
        if isinstance(value, dict):
            if len(value) == 1:
                for key, args in value.items():
                    if isinstance(key, str):
                        table = (self._version.condition_functions if conditions
                                 else self._version.functions)
                        fn = table.get(key)
                        if fn is not None:
                            return self._call(fn, args, (*path, key), guards, conditions)
                        if self._looks_like_function(key, conditions):
                            self._unknown_function(key, (*path, key), conditions)
                            self.bad_calls.add(path)
            changed: dict[Any, Any] | None = None
            for k, v in value.items():
                if isinstance(v, _CONTAINERS):
                    new = self.parse(v, (*path, k), guards, conditions)
                    if new is not v:
                        if changed is None:  # (same keys: iterating value goes on)
                            changed = value if self._owned else dict(value)
                        changed[k] = new
            return value if changed is None else changed
        if isinstance(value, list):
            items: list[Any] | None = None
            for i, v in enumerate(value):
                if isinstance(v, _CONTAINERS):
                    new = self.parse(v, (*path, i), guards, conditions)
                    if new is not v:
                        if items is None:
                            items = value if self._owned else list(value)
                        items[i] = new
            return value if items is None else items
        return value

    def parse_condition(self, value: Any, path: Path) -> Any:
        """A condition operand: a name, a boolean or a condition function call."""
        parsed = self.parse(value, path, conditions=True)
        if isinstance(parsed, Call):
            self.inline_conditions.append(parsed)
        else:
            self.check_condition(parsed, path)
        return parsed

    def _call(self, fn: FunctionDef, args: Any, path: Path, guards: tuple[Guard, ...],
              conditions: bool) -> Call:
        if fn.name == "if" and isinstance(args, list) and len(args) >= 2:
            cond = self.parse_condition(args[0], (*path, 0))
            parsed: Any = [cond]
            for i, branch in enumerate(args[1:3], start=1):
                guard = Guard(cond, i == 1)
                parsed.append(self.parse(branch, (*path, i), (*guards, guard), conditions))
            parsed.extend(self.parse(a, (*path, i), guards, conditions)
                          for i, a in enumerate(args[3:], start=3))
        elif fn.raw_args:
            parsed = args
        else:
            parsed = self.parse(args, path, guards, conditions)
        call = Call(fn, parsed, path)
        fn.check(call, self)
        if fn.target is not None:
            target = fn.target(call)
            if target is not None and target in self.resource_names:
                is_attr = fn.name in ("get_attr", "Fn::GetAtt")
                attr = parsed[1] if is_attr and isinstance(parsed, list) and len(parsed) > 1 \
                    else None
                self.references.append(Reference(target, path, guards, attr, is_attr))
        return call

    def _looks_like_function(self, key: str, conditions: bool) -> bool:
        if key in ALL_FUNCTION_NAMES:
            # equals/not/and/or outside conditions are plain keys in every version.
            return conditions or key not in _CONDITION_ONLY
        if key.startswith("Fn::"):
            return True
        # Other single-key maps are data to Heat ({get_input: x} in software configs), so only
        # a near miss of a real function name is taken for a misspelt call.
        return key.startswith(_FUNCTION_PREFIXES) and bool(
            difflib.get_close_matches(key, ALL_FUNCTION_NAMES, n=1, cutoff=0.85))

    def _unknown_function(self, key: str, path: Path, conditions: bool) -> None:
        version = self._version
        if conditions and key in version.functions:
            self.error(path, f"function '{key}' cannot be used in a condition; condition "
                       f"functions are {', '.join(sorted(version.condition_functions))}",
                       FUNCTION)
            return
        if key in ALL_FUNCTION_NAMES:
            first = version.added_in(key)
            since = f" (available from {first.name})" if first and first.order > version.order \
                else ""
            self.error(path, f"function '{key}' is not available in heat_template_version "
                       f"{version.name}{since}", VERSION)
            return
        names = version.condition_functions if conditions else version.functions
        self.error(path, f"unknown function '{key}'{_suggest(key, names)}", FUNCTION)


def _suggest(name: str, candidates: Any) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


def _as_map(data: Any, path: Path, problems: Problems) -> dict[Any, Any]:
    if data is not None and not isinstance(data, dict):
        problems.add(path, "must be a map", STRUCTURE)
    return data if isinstance(data, dict) else {}


def parse_template(
    source: str | bytes | Mapping[str, Any],
    *,
    files: Mapping[str, str] | None = None,
    location: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Template:
    """Parse and check a template document. Raises TemplateError with every problem found."""
    problems = Problems()
    template = parse_collecting(source, problems, files=files, location=location, limits=limits)
    problems.raise_if_any()
    assert template is not None
    return template


@collector_paused()
def parse_collecting(
    source: str | bytes | Mapping[str, Any],
    problems: Problems,
    *,
    files: Mapping[str, str] | None = None,
    location: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Template | None:
    """Parse, adding problems to ``problems``; None when the document is beyond use.

    A template with problems is still returned when its shape allows, so that validation can
    go on and report what else is wrong in the same answer.
    """
    files = files or {}
    what = location or "template"
    try:
        # A document read here is the parser's own: a tree's maps and lists that hold calls
        # are changed in place, not copied. One given as data is the caller's, never changed.
        data, owned = load_tree(source, what, limits) if isinstance(source, str | bytes) \
            else (source, False)
    except TemplateError as exc:
        problems.extend(exc.problems)
        return None
    if not isinstance(data, dict):
        problems.add(what, "a template must be a map of sections, starting with "
                     "heat_template_version", STRUCTURE)
        return None
    version = _version_of(data, problems)
    if version is None:
        return None
    structure.check_structure(data, "template", problems)
    for section in data:
        # Keys no version knows are the structural check's to report; here, the ones that
        # only some versions allow.
        first = FIRST_WITH_SECTION.get(section)
        if first is not None and section not in version.sections:
            problems.add((str(section),), f"section '{section}' is not allowed in "
                         f"heat_template_version {version.name} (available from {first})",
                         STRUCTURE)

    param_section = _as_map(data.get("parameters"), ("parameters",), problems)
    parameters = parse_parameters(
        param_section, version.name, problems,
        tags_allowed="tags" in version.parameter_keys, modulo_allowed=version.modulo_constraint,
    )
    resources_raw = _as_map(data.get("resources"), ("resources",), problems)
    outputs_raw = _as_map(data.get("outputs"), ("outputs",), problems)
    conditions_raw = _as_map(data.get("conditions"), ("conditions",), problems) \
        if "conditions" in version.sections else {}

    parser = _Parser(version, problems, files, location, param_section, resources_raw,
                     conditions_raw, owned)
    groups = _parameter_groups(data.get("parameter_groups"), parameters, problems)
    conditions = _conditions(parser, conditions_raw)
    resources = {name: _resource(parser, str(name), body) for name, body in resources_raw.items()
                 if isinstance(body, dict)}
    outputs = {name: _output(parser, str(name), body) for name, body in outputs_raw.items()
               if isinstance(body, dict)}
    for name, body in outputs_raw.items():
        if not isinstance(body, dict):
            problems.add(("outputs", name), "an output must be a map with a value", STRUCTURE)
    description = data.get("description")
    return Template(
        version=version,
        description=description if isinstance(description, str) else None,
        parameter_groups=groups,
        parameters=parameters,
        resources=resources,
        outputs=outputs,
        conditions=conditions,
        files=files,
        location=location,
        attribute_uses=tuple(parser.attribute_uses),
        inline_conditions=tuple(parser.inline_conditions),
    )


def _version_of(data: Mapping[str, Any], problems: Problems) -> TemplateVersion | None:
    if "heat_template_version" not in data:
        if any(k in data for k in _CFN_KEYS):
            problems.add("", "CloudFormation-format templates are not supported; "
                         "write the template in HOT (heat_template_version)", VERSION)
        else:
            problems.add(("heat_template_version",), "the template has no "
                         "heat_template_version", VERSION)
        return None
    value = data["heat_template_version"]
    version = lookup_version(value)
    if version is None:
        known = ", ".join(v.name + (f" ({v.alias})" if v.alias else "") for v in VERSIONS)
        problems.add(("heat_template_version",), f"unknown version {value!r}; known versions "
                     f"are {known}", VERSION)
    return version


def _parameter_groups(data: Any, parameters: Mapping[str, ParameterSchema],
                      problems: Problems) -> tuple[ParameterGroup, ...]:
    if not isinstance(data, list):
        return ()
    groups: list[ParameterGroup] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(data):
        if not isinstance(group, dict):
            continue
        names = group.get("parameters") or []
        if not isinstance(names, list):
            continue
        for j, name in enumerate(names):
            path = ("parameter_groups", i, "parameters", j)
            if name not in parameters:
                problems.add(path, f"parameter '{name}' is not defined", REFERENCE)
            elif name in seen:
                problems.add(path, f"parameter '{name}' is already in parameter group "
                             f"{seen[name]}; a parameter belongs to one group only", STRUCTURE)
            else:
                seen[name] = i
        groups.append(ParameterGroup(group.get("label"), group.get("description"),
                                     tuple(str(n) for n in names)))
    return tuple(groups)


def _conditions(parser: _Parser, raw: Mapping[str, Any]) -> dict[str, Any]:
    parser.enter("conditions", None)
    parsed = {str(name): parser.parse(body, ("conditions", name), conditions=True)
              for name, body in raw.items()}
    for name, body in parsed.items():
        if isinstance(body, str):
            parser.check_condition(body, ("conditions", name))
        elif not isinstance(body, bool | Call) and ("conditions", name) not in parser.bad_calls:
            parser.error(("conditions", name), "a condition must be a boolean, a condition "
                         "name or a condition function", FUNCTION)
    cycle = condition_cycle(parsed)
    if cycle:
        parser.error(("conditions", cycle[0]), "conditions refer to each other in a circle: "
                     + " -> ".join(cycle), REFERENCE)
    return parsed


def _resource(parser: _Parser, name: str, body: Mapping[str, Any]) -> ResourceDefinition:
    version = parser.version
    path: Path = ("resources", name)
    parser.enter("resources", name)
    start = len(parser.references)
    problems = parser.problems
    keys = version.resource_keys
    for key in body:
        if key not in keys:
            first = FIRST_WITH_RESOURCE_KEY.get(key)
            if first is not None:
                problems.add((*path, key), f"'{key}' is not a resource key in "
                             f"heat_template_version {version.name} (available from {first})",
                             STRUCTURE)
    rtype = body.get("type")
    if not isinstance(rtype, str) or not rtype:
        problems.add((*path, "type"), "the resource has no type", STRUCTURE)
        rtype = ""
    properties = parser.parse(body.get("properties") or {}, (*path, "properties"))
    if not isinstance(properties, _MAP_OR_CALL):
        problems.add((*path, "properties"), "properties must be a map", STRUCTURE)
    # Scalars parse to themselves: only maps and lists are walked.
    metadata = body.get("metadata")
    if isinstance(metadata, _CONTAINERS):
        metadata = parser.parse(metadata, (*path, "metadata"))
    update_policy = body.get("update_policy")
    if isinstance(update_policy, _CONTAINERS):
        update_policy = parser.parse(update_policy, (*path, "update_policy"))
    deletion_policy = body.get("deletion_policy", "Delete")
    if isinstance(deletion_policy, _CONTAINERS):
        deletion_policy = parser.parse(deletion_policy, (*path, "deletion_policy"))
    if isinstance(deletion_policy, str) and deletion_policy not in parser.deletion_policies:
        allowed = parser.deletion_policies
        problems.add((*path, "deletion_policy"), f"deletion_policy must be one of "
                     f"{', '.join(allowed)}, not {deletion_policy!r}", STRUCTURE)
    external_id = body.get("external_id")
    if isinstance(external_id, _CONTAINERS):
        external_id = parser.parse(external_id, (*path, "external_id"))
    condition = None
    if body.get("condition") is not None:
        condition = parser.parse_condition(body["condition"], (*path, "condition"))
    depends_on = _depends_on(parser, name, body.get("depends_on"), (*path, "depends_on"))
    return ResourceDefinition(
        name=name, type=rtype, properties=properties, metadata=metadata,
        depends_on=depends_on, update_policy=update_policy, deletion_policy=deletion_policy,
        condition=condition, external_id=external_id,
        references=tuple(parser.references[start:]),
    )


def _depends_on(parser: _Parser, name: str, value: Any, path: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        parser.error(path, "depends_on must be a resource name or a list of them", STRUCTURE)
        return ()
    names: list[str] = []
    for i, item in enumerate(items):
        where = path if isinstance(value, str) else (*path, i)
        if not isinstance(item, str):
            parser.error(where, "depends_on must list resource names", STRUCTURE)
        elif item not in parser.resource_names:
            parser.error(where, f"resource '{item}' is not defined"
                         f"{_suggest(item, parser.resource_names)}", REFERENCE)
        elif item not in names:
            names.append(item)
    return tuple(names)


def _output(parser: _Parser, name: str, body: Mapping[str, Any]) -> OutputDefinition:
    version = parser.version
    path: Path = ("outputs", name)
    parser.enter("outputs", name)
    start = len(parser.references)
    for key in body:
        first = FIRST_WITH_OUTPUT_KEY.get(key)
        if first is not None and key not in version.output_keys:
            parser.error((*path, key), f"'{key}' is not an output key in heat_template_version "
                         f"{version.name} (available from {first})", STRUCTURE)
    value = parser.parse(body.get("value"), (*path, "value"))
    condition = None
    if body.get("condition") is not None:
        condition = parser.parse_condition(body["condition"], (*path, "condition"))
    description = body.get("description")
    return OutputDefinition(
        name=name, value=value,
        description=description if isinstance(description, str) else None,
        condition=condition, references=tuple(parser.references[start:]),
    )
