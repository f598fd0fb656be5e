"""Template parameters: their definitions, and the values a stack gets for them.

``parse.py`` turns a template's ``parameters`` section into :class:`ParameterSchema` values
with :func:`parse_parameters`; ``validate.py`` computes a stack's parameter values with
:func:`resolve_values` from the user's values, the environments' ``parameter_defaults`` and
the template defaults; ``environment.py`` reads the types when merging environments.

Conversions and checks are Heat's (``heat/engine/parameters.py``, ``heat/engine/hot/
parameters.py``): numbers from numeric strings, booleans by strutils' words, a
comma-delimited list split on every comma (items are not stripped), json from a JSON string or
any JSON-compatible value, and a null value or null default counting as none at all. The value
of a ``hidden`` parameter never appears in a message.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from convergence.template.constraints import (
    NO_CUSTOM_CONSTRAINTS,
    Constraint,
    CustomConstraints,
    check_value,
    parse_constraints,
)
from convergence.template.conversions import (
    BOOLEAN,
    COMMA_DELIMITED_LIST,
    JSON,
    NUMBER,
    PARAMETER_TYPES,
    STRING,
    bool_from_string,
    show,
    str_to_num,
)
from convergence.template.errors import PARAMETER, Path, PathItem, Problems, TemplateError

__all__ = [
    "BOOLEAN",
    "COMMA_DELIMITED_LIST",
    "JSON",
    "NO_DEFAULT",
    "NUMBER",
    "PARAMETER_TYPES",
    "STRING",
    "ParameterSchema",
    "coerce",
    "parse_parameters",
    "resolve_values",
]


class _NoDefault:
    """The absence of a default (``None`` is a value some callers need to tell apart)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"  # pickles as the singleton


NO_DEFAULT: Final[Any] = _NoDefault()

# Keys of a parameter definition in every HOT version. Heat's list also has ``schema``, which
# it accepts and ignores; so do we.
_KEYS = frozenset({"type", "label", "description", "default", "hidden", "constraints",
                   "immutable", "schema"})
TAGS_VERSION = "2018-03-02"


@dataclass(frozen=True, slots=True)
class ParameterSchema:
    """One parameter of a template, as defined in its ``parameters`` section."""

    name: str
    type: str
    label: str | None = None
    description: str | None = None
    default: Any = NO_DEFAULT  # as written in the template; converted when used
    hidden: bool = False
    immutable: bool = False
    tags: tuple[str, ...] = ()
    constraints: tuple[Constraint, ...] = ()

    @property
    def required(self) -> bool:
        """Whether a value must be supplied (the template gives no default)."""
        return self.default is NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


def parse_parameters(
    section: Any,
    version_name: str,
    problems: Problems,
    *,
    tags_allowed: bool,
    modulo_allowed: bool,
) -> dict[str, ParameterSchema]:
    """The parameters defined by a template's ``parameters`` section, checked.

    Checks keys (``tags`` only when the version allows it, ``modulo`` likewise), the type,
    the constraints and which apply to the type, and that the default has the type and meets
    the constraints other than custom ones (which need the cloud). A parameter whose
    definition is broken is still in the result (as a string parameter when its type is
    unusable), so that references to it do not add noise to the problems reported.
    """
    if section is None:
        return {}
    if not isinstance(section, dict):
        problems.add(("parameters",), "parameters must be a map of parameter definitions",
                     PARAMETER)
        return {}
    result: dict[str, ParameterSchema] = {}
    for name, definition in section.items():
        if not isinstance(name, str):
            problems.add(("parameters", str(name)), f"a parameter name must be a string, not "
                         f"{show(name)}", PARAMETER)
            continue
        result[name] = _parse_one(name, definition, version_name, problems, tags_allowed,
                                  modulo_allowed)
    return result


def _parse_one(name: str, definition: Any, version_name: str, problems: Problems,
               tags_allowed: bool, modulo_allowed: bool) -> ParameterSchema:
    path: Path = ("parameters", name)
    if not isinstance(definition, dict):
        problems.add(path, f"parameter '{name}' must be a map with at least a type",
                     PARAMETER)
        return ParameterSchema(name, STRING)
    allowed = _KEYS | {"tags"} if tags_allowed else _KEYS
    for key in definition:
        if key in allowed:
            continue
        if key == "tags":
            problems.add((*path, "tags"), f"'tags' needs heat_template_version {TAGS_VERSION} "
                         f"or later (this template is {version_name})", PARAMETER)
        else:
            problems.add((*path, str(key)), f"unknown key '{key}' in parameter '{name}'; the "
                         f"keys are {', '.join(sorted(allowed - {'schema'}))}"
                         f"{_close(str(key), allowed)}", PARAMETER)
    param_type = _parse_type(definition, path, problems)
    hidden = bool(definition.get("hidden", False))  # Heat uses the value's truth, as here
    constraints = parse_constraints(definition.get("constraints"), param_type,
                                    (*path, "constraints"), problems,
                                    modulo_allowed=modulo_allowed, version_name=version_name)
    tags = definition.get("tags") if tags_allowed else None
    if tags is not None and not isinstance(tags, list):
        problems.add((*path, "tags"), "tags must be a list", PARAMETER)
        tags = None
    default = definition.get("default")
    schema = ParameterSchema(
        name=name,
        type=param_type or STRING,
        label=_text(definition, "label", path, problems),
        description=_text(definition, "description", path, problems),
        # Heat: a null default is no default, so the parameter is required.
        default=NO_DEFAULT if default is None else default,
        hidden=hidden,
        immutable=bool(definition.get("immutable", False)),
        tags=tuple(str(t) for t in tags or ()),
        constraints=constraints,
    )
    if param_type is not None and schema.has_default:
        _check_default(schema, (*path, "default"), problems)
    return schema


def _parse_type(definition: Mapping[str, Any], path: Path, problems: Problems) -> str | None:
    if "type" not in definition:
        problems.add(path, f"parameter '{path[-1]}' has no type; give one of "
                     f"{', '.join(PARAMETER_TYPES)}", PARAMETER)
        return None
    value = definition["type"]
    if isinstance(value, str) and value in PARAMETER_TYPES:
        return value
    hint = ""
    if isinstance(value, str):
        lowered = {"commadelimitedlist": COMMA_DELIMITED_LIST, "list": COMMA_DELIMITED_LIST,
                   "map": JSON, "integer": NUMBER, "bool": BOOLEAN}
        guess = value.lower() if value.lower() in PARAMETER_TYPES else lowered.get(value.lower())
        hint = f"; did you mean '{guess}'?" if guess else ""
    problems.add((*path, "type"), f"unknown parameter type {show(value)}; the types are "
                 f"{', '.join(PARAMETER_TYPES)}{hint}", PARAMETER)
    return None


def _text(definition: Mapping[str, Any], key: str, path: Path,
          problems: Problems) -> str | None:
    value = definition.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        problems.add((*path, key), f"{key} must be a string", PARAMETER)
        return None
    return str(value)


def _check_default(schema: ParameterSchema, path: Path, problems: Problems) -> None:
    try:
        value = coerce(schema, schema.default, path)
    except TemplateError as exc:
        for p in exc.problems:
            problems.add(p.path, f"the default is not valid: {p.message}", PARAMETER)
        return
    # Heat checks a default against every constraint but the custom ones, which need the cloud.
    for v in check_value(schema.constraints, value, schema.type, hidden=schema.hidden,
                         skip_custom=True):
        problems.add(path, f"the default is not valid: {v.message} "
                     f"(constraints[{v.index}], {v.kind})", PARAMETER)


def coerce(schema: ParameterSchema, value: Any, path: Path) -> Any:
    """``value`` converted to the parameter's type, as Heat converts it; raises TemplateError."""
    try:
        return _convert(schema.type, value, schema.hidden)
    except ValueError as exc:
        raise TemplateError.at(path, str(exc), PARAMETER) from None


def _convert(param_type: str, value: Any, hidden: bool) -> Any:
    shown = show(value, hidden)
    if param_type == STRING:
        # Heat's StringParam gives str(value) for whatever it was given (str(True) is "True").
        return value if isinstance(value, str) else str(value)
    if param_type == NUMBER:
        try:
            return str_to_num(value)
        except ValueError:
            raise ValueError(f"{shown} is not a number") from None
    if param_type == BOOLEAN:
        try:
            return bool_from_string(value)
        except ValueError as exc:
            raise ValueError(f"{shown} is {exc}") from None
    if param_type == COMMA_DELIMITED_LIST:
        if isinstance(value, list):
            return [v if isinstance(v, str) else str(v) for v in value]
        if isinstance(value, str):
            # Heat's delim_string_to_list: "" is [], and items keep their spaces.
            return value.split(",") if value else []
        raise ValueError(f"{shown} is not a comma-delimited string or a list")
    if param_type == JSON:
        return _json(value, shown)
    raise ValueError(f"unknown parameter type '{param_type}'")


def _json(value: Any, shown: str) -> Any:
    if isinstance(value, str):
        if not value:
            return value  # Heat passes an empty string through unparsed
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{shown} is not valid JSON: {exc}") from None
        except RecursionError:  # the parser recurses once per level
            raise ValueError(f"{shown} is not valid JSON: it nests too deep") from None
    try:
        # The round trip Heat makes: copies, and turns tuples into lists and keys into strings.
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{shown} cannot be represented as JSON: {exc}") from None


def resolve_values(
    schemas: Mapping[str, ParameterSchema],
    given: Mapping[str, Any],
    defaults: Mapping[str, Any],
    problems: Problems,
    *,
    require_all: bool,
    custom: CustomConstraints = NO_CUSTOM_CONSTRAINTS,
) -> dict[str, Any]:
    """The value of each parameter: given, else from ``parameter_defaults``, else the default.

    ``given`` holds the user's values (environment ``parameters`` and command-line values);
    a name the template does not define is an error there, but not in ``defaults``, which
    environments also mean for nested templates. A null value counts as none (Heat). Values
    are converted to their type and checked against every constraint, custom ones included.
    Parameters with no value at all are absent from the result, and an error only when
    ``require_all``.
    """
    for name in given:
        if name not in schemas:
            problems.add(("parameters", str(name)), f"the template has no parameter '{name}'"
                         f"{_close(str(name), schemas)}", PARAMETER)
    values: dict[str, Any] = {}
    for name, schema in schemas.items():
        where: tuple[PathItem, ...]
        if given.get(name) is not None:
            raw, where, from_template = given[name], ("parameters", name), False
        elif defaults.get(name) is not None:
            raw, where, from_template = defaults[name], ("parameter_defaults", name), False
        elif schema.has_default:
            raw, where, from_template = schema.default, ("parameters", name, "default"), True
        else:
            if require_all:
                problems.add(("parameters", name), f"parameter '{name}' needs a value: the "
                             "template gives it no default and none was supplied", PARAMETER)
            continue
        try:
            value = coerce(schema, raw, where)
        except TemplateError as exc:
            if not from_template:  # a bad template default was reported when it was parsed
                problems.absorb(exc)
            continue
        for v in check_value(schema.constraints, value, schema.type, hidden=schema.hidden,
                             custom=custom, skip_custom=False):
            # The template default was checked at parse time against all but custom ones.
            if from_template and v.kind != "custom_constraint":
                continue
            problems.add(where, f"{v.message} (constraints[{v.index}], {v.kind})", PARAMETER)
        values[name] = value
    return values


def _close(name: str, candidates: Mapping[str, Any] | frozenset[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""
