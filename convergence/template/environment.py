"""Environments: parameter values, parameter defaults and the resource registry of a stack.

The CLI and the API read environment files with :func:`load_environment` (or
:func:`parse_environment` for data already parsed) and combine several, in order, with
:func:`merge_environments`; ``validate.py`` takes the merged values and registry from the
result. The registry itself (:class:`ResourceRegistry`, :class:`ResourceSection`: type
resolution, nesting, hooks) is in ``registry.py``; this module parses its section and
re-exports both classes.

The rules are Heat's (``heat/common/environment_format.py``, ``heat/engine/environment.py``,
``heat/common/environment_util.py``). Where Heat fails with an internal error or silently
drops data, this reports a problem or does what Heat's code was written to do, and says so
where it happens. The one deliberate divergence: per-resource ``resources`` sections of
several files merge deeply (as heatclient merged files before Heat did it server-side), where
Heat's ``merge_environments`` lets the last file's ``resources`` map replace earlier ones.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convergence.template.conversions import str_to_num
from convergence.template.errors import ENVIRONMENT, Path, Problems, TemplateError
from convergence.template.parameters import (
    BOOLEAN,
    COMMA_DELIMITED_LIST,
    JSON,
    NUMBER,
    STRING,
    ParameterSchema,
)
from convergence.template.registry import ResourceRegistry as ResourceRegistry
from convergence.template.registry import ResourceSection as ResourceSection
from convergence.template.source import DEFAULT_LIMITS, Limits, load_document

SECTIONS = ("parameters", "parameter_defaults", "resource_registry", "event_sinks",
            "encrypted_param_names", "parameter_merge_strategies")
HOOK_TYPES = ("pre-create", "pre-update", "pre-delete", "post-create", "post-update",
              "post-delete")
RESTRICTED_ACTIONS = ("update", "replace")
OVERWRITE, MERGE, DEEP_MERGE = "overwrite", "merge", "deep_merge"
MERGE_STRATEGIES = (OVERWRITE, MERGE, DEEP_MERGE)
EVENT_SINK_TYPES = {"zaqar-queue": (frozenset({"target"}), frozenset({"ttl"}))}


@dataclass(frozen=True, slots=True)
class Environment:
    """One environment file, or several merged. ``source`` names it in messages."""

    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)
    resource_registry: ResourceRegistry = field(default_factory=ResourceRegistry)
    parameter_merge_strategies: Mapping[str, str] = field(default_factory=dict)
    event_sinks: tuple[Mapping[str, Any], ...] = ()
    encrypted_param_names: tuple[str, ...] = ()
    source: str = ""


# -- reading ---------------------------------------------------------------------------------


def load_environment(text: str | bytes, what: str, problems: Problems,
                     limits: Limits = DEFAULT_LIMITS) -> Environment:
    """An environment from the text of a file; problems (syntax included) go to ``problems``."""
    try:
        data = load_document(text, what, limits)
    except TemplateError as exc:
        problems.absorb(exc)
        return Environment(source=what)
    return parse_environment(data, what, problems)


def parse_environment(data: Any, what: str, problems: Problems) -> Environment:
    """An environment from parsed data; every problem is added, under ``what``."""
    if data is None:
        return Environment(source=what)  # an empty document is an empty environment
    if not isinstance(data, dict):
        problems.add((what,), "an environment must be a map of sections ("
                     f"{', '.join(SECTIONS)})", ENVIRONMENT)
        return Environment(source=what)
    for key, value in data.items():
        if key not in SECTIONS:
            problems.add((what, str(key)), f"unknown section '{key}'; the sections are "
                         f"{', '.join(SECTIONS)}{_close(str(key), SECTIONS)}", ENVIRONMENT)
        elif value is None:
            # Heat refuses "environment has empty section"; usually a section whose entries
            # were all commented out.
            problems.add((what, key), f"section '{key}' is empty; remove it or give it "
                         "entries", ENVIRONMENT)
    return Environment(
        parameters=_values(data, "parameters", what, problems),
        parameter_defaults=_values(data, "parameter_defaults", what, problems),
        resource_registry=_registry(data.get("resource_registry"), (what, "resource_registry"),
                                    problems),
        parameter_merge_strategies=_strategies(data.get("parameter_merge_strategies"),
                                               (what, "parameter_merge_strategies"), problems),
        event_sinks=_event_sinks(data.get("event_sinks"), (what, "event_sinks"), problems),
        encrypted_param_names=_names(data.get("encrypted_param_names"),
                                     (what, "encrypted_param_names"), problems),
        source=what,
    )


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"{value!r}"


def _values(data: Mapping[str, Any], section: str, what: str,
            problems: Problems) -> dict[str, Any]:
    value = data.get(section)
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add((what, section), f"{section} must be a map of parameter names to values, "
                     f"not {_kind(value)}", ENVIRONMENT)
        return {}
    out: dict[str, Any] = {}
    for name, v in value.items():
        if not isinstance(name, str):
            problems.add((what, section, str(name)), f"parameter name {name!r} must be a "
                         "string", ENVIRONMENT)
            continue
        out[name] = v
    return out


def _strategies(value: Any, path: Path, problems: Problems) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(path, "parameter_merge_strategies must be a map of parameter names (or "
                     f"'default') to {', '.join(MERGE_STRATEGIES)}", ENVIRONMENT)
        return {}
    out: dict[str, str] = {}
    for name, strategy in value.items():
        # Heat quietly falls back to the file's default for an unknown strategy; a misspelt
        # strategy silently overwriting is worth an error.
        if strategy not in MERGE_STRATEGIES:
            problems.add((*path, str(name)), f"unknown merge strategy {strategy!r}; the "
                         f"strategies are {', '.join(MERGE_STRATEGIES)}", ENVIRONMENT)
            continue
        out[str(name)] = strategy
    return out


def _event_sinks(value: Any, path: Path, problems: Problems) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.add(path, f"event_sinks must be a list of sinks, not {_kind(value)}",
                     ENVIRONMENT)
        return ()
    out: list[Mapping[str, Any]] = []
    for i, sink in enumerate(value):
        where = (*path, i)
        if not isinstance(sink, dict):
            problems.add(where, "an event sink must be a map with a type, such as "
                         "{type: zaqar-queue, target: my-queue}", ENVIRONMENT)
            continue
        sink_type = sink.get("type")
        if sink_type not in EVENT_SINK_TYPES:
            problems.add((*where, "type"), f"unknown event sink type {sink_type!r}; the types "
                         f"are {', '.join(EVENT_SINK_TYPES)}", ENVIRONMENT)
            continue
        required, optional = EVENT_SINK_TYPES[sink_type]
        good = True
        for key in sink:
            if key != "type" and key not in required | optional:
                problems.add((*where, str(key)), f"unknown key '{key}' for a {sink_type} sink",
                             ENVIRONMENT)
                good = False
        for key in sorted(required):
            if not isinstance(sink.get(key), str) or not sink[key]:
                problems.add((*where, key), f"a {sink_type} sink needs a {key} (a queue name)",
                             ENVIRONMENT)
                good = False
        ttl = sink.get("ttl")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
            problems.add((*where, "ttl"), "ttl must be a positive number of seconds",
                         ENVIRONMENT)
            good = False
        if good:
            out.append(dict(sink))
    return tuple(out)


def _names(value: Any, path: Path, problems: Problems) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        problems.add(path, "encrypted_param_names must be a list of parameter names",
                     ENVIRONMENT)
        return ()
    return tuple(value)


def _registry(value: Any, path: Path, problems: Problems) -> ResourceRegistry:
    if value is None:
        return ResourceRegistry()
    if not isinstance(value, dict):
        problems.add(path, f"resource_registry must be a map, not {_kind(value)}", ENVIRONMENT)
        return ResourceRegistry()
    mappings: dict[str, str | None] = {}
    resources: dict[str, ResourceSection] = {}
    base_url: str | None = None
    for key, target in value.items():
        where = (*path, str(key))
        if not isinstance(key, str):
            problems.add(where, f"a resource type must be a string, not {key!r}", ENVIRONMENT)
        elif key == "resources":
            resources = _sections(target, where, problems)
        elif key == "base_url":
            if isinstance(target, str):
                base_url = target
            else:
                problems.add(where, "base_url must be a string", ENVIRONMENT)
        elif key in ("hooks", "restricted_actions"):
            # Heat stores these at the top level and never reads them there.
            problems.add(where, f"{key} apply to resources: set them under "
                         f"resources.<resource name>.{key}", ENVIRONMENT)
        elif _mapping_ok(target, where, problems, per_resource=False):
            mappings[key] = target
    return ResourceRegistry(mappings, resources, base_url)


def _mapping_ok(target: Any, where: Path, problems: Problems, per_resource: bool) -> bool:
    """Whether a mapping's target is a type or file name, or None (a removed mapping)."""
    if target is None or (isinstance(target, str) and target):
        return True
    if isinstance(target, dict) and not per_resource:
        problems.add(where, f"'{where[-1]}' must map to a resource type or a template file, "
                     "not a map (settings for particular resources go under resources)",
                     ENVIRONMENT)
    else:
        problems.add(where, f"'{where[-1]}' must map to a resource type or a template file, "
                     f"not {_kind(target)}", ENVIRONMENT)
    return False


def _sections(value: Any, path: Path, problems: Problems) -> dict[str, ResourceSection]:
    if not isinstance(value, dict):
        problems.add(path, "resources must be a map of resource names (or patterns such as "
                     f"'server_*') to settings, not {_kind(value)}", ENVIRONMENT)
        return {}
    out: dict[str, ResourceSection] = {}
    for name, body in value.items():
        where = (*path, str(name))
        if body is None:
            continue  # heatclient leaves earlier settings alone for a null
        if not isinstance(name, str | int):
            problems.add(where, f"a resource name must be a string, not {name!r}", ENVIRONMENT)
            continue
        section = _section(body, where, problems)
        if section is not None:
            out[str(name)] = section
    return out


def _section(body: Any, path: Path, problems: Problems) -> ResourceSection | None:
    if not isinstance(body, dict):
        problems.add(path, "the settings of a resource must be a map (hooks, "
                     "restricted_actions, type mappings, or the resources of its nested "
                     f"stack), not {_kind(body)}", ENVIRONMENT)
        return None
    mappings: dict[str, str | None] = {}
    hooks: frozenset[str] | None = None
    restricted: frozenset[str] | None = None
    children: dict[str, ResourceSection] = {}
    for key, value in body.items():
        where = (*path, str(key))
        if key == "hooks":
            hooks = _choices(value, where, HOOK_TYPES, "hook", problems)
        elif key == "restricted_actions":
            restricted = _choices(value, where, RESTRICTED_ACTIONS, "restricted action",
                                  problems)
        elif key == "base_url":
            if not isinstance(value, str):
                problems.add(where, "base_url must be a string", ENVIRONMENT)
        elif isinstance(value, dict):
            child = _section(value, where, problems)  # a resource of the nested stack
            if child is not None:
                children[str(key)] = child
        elif _mapping_ok(value, where, problems, per_resource=True):
            mappings[str(key)] = value
    return ResourceSection(mappings, hooks, restricted, children)


def _choices(value: Any, path: Path, allowed: Sequence[str], what: str,
             problems: Problems) -> frozenset[str]:
    """A word from ``allowed`` or a list of them, as Heat accepts hooks and restricted actions."""
    items: list[tuple[Path, Any]]
    if isinstance(value, str):
        items = [(path, value)]
    elif isinstance(value, list):
        items = [((*path, i), v) for i, v in enumerate(value)]
    else:
        problems.add(path, f"must be a {what} or a list of them ({', '.join(allowed)}), not "
                     f"{_kind(value)}", ENVIRONMENT)
        return frozenset()
    good: set[str] = set()
    for where, item in items:
        if item in allowed:
            good.add(item)
        else:
            problems.add(where, f"unknown {what} {item!r}; the {what}s are "
                         f"{', '.join(allowed)}{_close(str(item), allowed)}", ENVIRONMENT)
    return frozenset(good)


def _close(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


# -- merging ---------------------------------------------------------------------------------


def merge_environments(envs: Sequence[Environment],
                       param_schemas: Mapping[str, ParameterSchema] | None = None) -> Environment:
    """Several environments combined in order, later ones overriding, as Heat merges files.

    For ``parameters`` and ``parameter_defaults``, each file's ``parameter_merge_strategies``
    (per parameter, or ``default``; otherwise ``overwrite``) says how its values join those
    of earlier files: ``overwrite`` replaces; ``merge`` joins by the parameter's type (json
    maps shallowly, comma-delimited lists concatenated, strings concatenated with no
    separator, numbers added; booleans cannot merge); ``deep_merge`` is ``merge`` with json
    maps merged recursively. A parameter merged with different strategies by two files is an
    error, as are values that cannot merge; TemplateError carries them all. The first file
    that sets a section gives its values as they are, as in Heat. A type comes from
    ``param_schemas`` (which should include nested templates' parameters), else from the
    values themselves; where Heat drops a value whose name is not in its schemas, it is kept
    here, so that a misspelt name is reported when values are resolved.
    """
    problems = Problems()
    sections: dict[str, dict[str, Any]] = {"parameters": {}, "parameter_defaults": {}}
    registry = ResourceRegistry()
    sinks: list[Mapping[str, Any]] = []
    encrypted: list[str] = []
    chosen: dict[str, str] = {}
    for i, env in enumerate(envs):
        where = env.source or f"environment {i + 1}"
        for section, old in sections.items():
            new = env.parameters if section == "parameters" else env.parameter_defaults
            if not new:
                continue
            if not old:
                old.update(copy.deepcopy(dict(new)))
                continue
            for key, value in new.items():
                if value is None:
                    continue  # Heat: a null never replaces a value
                strategy = _strategy(env.parameter_merge_strategies, key)
                earlier = chosen.setdefault(key, strategy)
                if earlier != strategy:
                    problems.add((where, section, key), f"parameter '{key}' is merged with "
                                 f"'{strategy}' here but with '{earlier}' by an earlier "
                                 "environment; a parameter takes one merge strategy",
                                 ENVIRONMENT)
                    continue
                if strategy == OVERWRITE:
                    old[key] = copy.deepcopy(value)
                    continue
                schema = param_schemas.get(key) if param_schemas is not None else None
                try:
                    old[key] = _merge_value(old.get(key), value, _type_of(schema, value),
                                            deep=strategy == DEEP_MERGE)
                except ValueError as exc:
                    problems.add((where, section, key), f"cannot {strategy.replace('_', ' ')} "
                                 f"parameter '{key}': {exc}", ENVIRONMENT)
        registry = registry.merged(env.resource_registry)
        sinks.extend(env.event_sinks)
        encrypted.extend(n for n in env.encrypted_param_names if n not in encrypted)
    problems.raise_if_any()
    return Environment(
        parameters=sections["parameters"],
        parameter_defaults=sections["parameter_defaults"],
        resource_registry=registry,
        # The strategies were for this merge; the result's values are final.
        parameter_merge_strategies={},
        event_sinks=tuple(sinks),
        encrypted_param_names=tuple(encrypted),
        source=", ".join(e.source for e in envs if e.source),
    )


def _strategy(strategies: Mapping[str, str], key: str) -> str:
    fallback = strategies.get("default", OVERWRITE)
    chosen = strategies.get(key, fallback)
    return chosen if chosen in MERGE_STRATEGIES else fallback


def _type_of(schema: ParameterSchema | None, value: Any) -> str:
    if schema is not None:
        return schema.type
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, dict):
        return JSON
    if isinstance(value, list):
        return COMMA_DELIMITED_LIST
    if isinstance(value, int | float):
        return NUMBER
    return STRING


def _merge_value(old: Any, new: Any, param_type: str, deep: bool) -> Any:
    if param_type == JSON:
        parsed_new = _as_map(new)
        parsed_old = _as_map(old) if old not in (None, "") else {}
        return _merge_map(parsed_old, parsed_new, deep)
    if param_type == COMMA_DELIMITED_LIST:
        return _merge_list(old, new)
    if param_type == STRING:
        if not isinstance(new, str):
            raise ValueError(f"{_sort(new)} is not a string")
        if old is None:
            return new
        if not isinstance(old, str | int | float) or isinstance(old, bool):
            raise ValueError(f"the earlier value, {_sort(old)}, is not a string")
        return f"{old}{new}"
    if param_type == NUMBER:
        # Heat's number merge refuses numbers and concatenates numeric strings ("2" + "3" is
        # "23"); adding is what it was written to do.
        try:
            return str_to_num(new) + (str_to_num(old) if old is not None else 0)
        except ValueError:
            raise ValueError("both values must be numbers") from None
    raise ValueError(f"a {param_type} parameter can only be overwritten")


def _sort(value: Any) -> str:
    """What kind of value it is, for messages about values that may be secret."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return _kind(value) if isinstance(value, dict | list) or value is None else "a value"


def _as_map(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"the value is not valid JSON: {exc}") from None
        except RecursionError:  # the parser recurses once per level
            raise ValueError("the value is not valid JSON: it nests too deep") from None
    if not isinstance(value, dict):
        raise ValueError(f"{_sort(value)} is not a map")
    return copy.deepcopy(value)


def _merge_map(old: Mapping[str, Any], new: Mapping[str, Any], deep: bool) -> dict[str, Any]:
    """Heat's ``merge_map``: nulls skipped; deep merges maps, extends lists, joins strings."""
    out = copy.deepcopy(dict(old))
    for key, value in new.items():
        if value is None:
            continue
        before = out.get(key)
        if not deep or not before:
            out[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(before, dict):
            out[key] = _merge_map(before, value, deep)
        elif isinstance(value, list) and isinstance(before, list):
            out[key] = before + copy.deepcopy(value)
        elif isinstance(value, str) and isinstance(before, str):
            out[key] = before + value
        else:
            out[key] = copy.deepcopy(value)  # Heat fails on mixed kinds; the later value wins
    return out


def _merge_list(old: Any, new: Any) -> Any:
    """Heat's ``merge_list``: lists concatenate, comma-delimited strings join with a comma."""
    if not isinstance(new, str | list):
        raise ValueError(f"{_sort(new)} is not a list or a comma-delimited string")
    if not old:
        return copy.deepcopy(new)
    if isinstance(old, str) and isinstance(new, str):
        return f"{old},{new}"
    # Heat fails when one is a list and the other a string; split the string instead.
    old_items = old.split(",") if isinstance(old, str) else list(old)
    new_items = new.split(",") if isinstance(new, str) else copy.deepcopy(new)
    return old_items + new_items

