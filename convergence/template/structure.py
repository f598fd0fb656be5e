"""The structural check of templates and environments: sections, keys and shapes of values.

Callers: :func:`convergence.template.parse.parse_template` for templates and the environment
loader for environments, on what :func:`convergence.template.source.load_document` returned. It
does not depend on the template version: which sections, keys, functions and spellings a given
``heat_template_version`` allows is checked afterwards, as are references and resource types.
The rules live in two JSON Schema files in ``convergence/template/schemas/``, shipped in the
package (an installed wheel validates as a checkout does) and usable by editors:
``hot-template.schema.json`` and ``environment.schema.json``.

Valid documents are the common case and templates can be large (100,000 resources), so each
schema is compiled once per process into plain Python with ``fastjsonschema`` and that runs first.
Only when it refuses the document does ``jsonschema`` run, slower but able to list every error
with its location; each error is then rewritten into a plain sentence (``unknown key
'propertes' (did you mean 'properties'?)``) and added to the caller's :class:`Problems` with the
kind ``structure``. The wording of what a value should be comes from the ``x-message``
annotation the schemas put on their parts (validators and editors ignore unknown keywords), so
the rule and its explanation are kept side by side.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal, cast

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from convergence.template.errors import STRUCTURE, PathItem, Problems

__all__ = ["SCHEMA_DIR", "Kind", "check_structure", "load_schema", "schema_path"]

Kind = Literal["template", "environment"]

# Package data (pyproject's package-data), next to this module in a checkout and in a wheel.
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"

_SCHEMA_FILES: dict[str, str] = {
    "template": "hot-template.schema.json",
    "environment": "environment.schema.json",
}

# What a JSON Schema type is called in a message.
_TYPE_WORDS: dict[str, str] = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "null": "empty",
}

# Errors that keep their own precise wording even where the schema gives an x-message: the
# x-message says what a value should look like, these say which key is missing or unknown.
_OWN_WORDING = frozenset({"required", "additionalProperties"})


def schema_path(kind: Kind) -> Path:
    """The file holding the JSON Schema for ``kind``."""
    try:
        return SCHEMA_DIR / _SCHEMA_FILES[kind]
    except KeyError:
        raise ValueError(f"unknown kind of document {kind!r}") from None


@cache
def load_schema(kind: Kind) -> Mapping[str, Any]:
    """The JSON Schema for ``kind``, read once per process. Shared: do not modify it."""
    with schema_path(kind).open(encoding="utf-8") as f:
        schema: dict[str, Any] = json.load(f)
    return schema


def _compile(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Callable[[Any], Any]:
    # Local $refs are expanded first: fastjsonschema calls a function per $ref and builds the
    # error location for it on every call, even when nothing fails, which tripled the time
    # spent on each resource. use_default=False: the schemas carry defaults for editors, and
    # fastjsonschema would otherwise write them into the document it checks.
    # detailed_exceptions=False: on failure jsonschema explains, not fastjsonschema.
    validate = fastjsonschema.compile(
        {**_expand_refs(schema, root, ()), "$defs": root.get("$defs", {})},
        use_default=False, use_formats=False, detailed_exceptions=False,
    )
    return cast(Callable[[Any], Any], validate)


def _expand_refs(node: Any, root: Mapping[str, Any], expanding: tuple[str, ...]) -> Any:
    """``node`` with each local ``#/$defs/...`` reference replaced by its definition.

    A reference met again while its own definition is being expanded (the nested overrides of
    an environment's resource registry) is left as it is, which keeps the result finite.
    """
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in expanding:
            target = root["$defs"][ref[len("#/$defs/"):]]
            return _expand_refs(target, root, (*expanding, ref))
        return {k: v if k == "$defs" else _expand_refs(v, root, expanding)
                for k, v in node.items()}
    if isinstance(node, list):
        return [_expand_refs(item, root, expanding) for item in node]
    return node


@cache
def _fast_validator(kind: Kind) -> Callable[[Any], Any]:
    root = load_schema(kind)
    return _compile(root, root)


@cache
def _full_validator(kind: Kind) -> Draft202012Validator:
    return Draft202012Validator(load_schema(kind))


def check_structure(data: Any, kind: Kind, problems: Problems, prefix: tuple[PathItem, ...] = ()
                    ) -> bool:
    """Check the sections, keys and shapes of a parsed template or environment.

    Adds one ``structure`` problem per error to ``problems``, its path starting with
    ``prefix``, and returns True when there was none. An empty environment (``None``) is
    valid, as in Heat; an empty template is not.
    """
    validate = _fast_validator(kind)
    if data is None and kind == "environment":
        return True
    try:
        validate(_unsettled_part(data, kind))
    except fastjsonschema.JsonSchemaValueException:
        pass
    else:
        return True
    root = load_schema(kind)
    found = False
    validator = _full_validator(kind)
    errors = [_most_specific(e) for e in validator.iter_errors(_failing_part(data, kind))]
    # jsonschema reports in schema order, and unknown keys in set order; users read documents
    # top to bottom, so problems are listed in the order of the places they concern.
    order = _DocumentOrder(data)
    errors.sort(key=lambda e: order.key(e.absolute_path))
    for error in errors:
        for path, message in _explain(error, data, root):
            problems.add(prefix + path, message, STRUCTURE)
            found = True
    if not found:  # pragma: no cover - the two validators disagree: a bug in one of them
        problems.add(prefix, f"the {kind} does not have the expected structure", STRUCTURE)
    return False


# The rules of the commonest resource entries, which a few type checks settle without the
# compiled validator: used only while the schema says exactly this of them (see
# :func:`_quick_resources`), so the schema stays the one place the rules are written.
_QUICK_RULES: dict[str, Any] = {
    "type": {"type": "string", "minLength": 1},
    "properties": {"type": "object"},
    "metadata": {"type": "object"},
    "update_policy": {"type": "object"},
    "depends_on": {"type": ["string", "array"], "items": {"type": "string"}},
    "condition": {"type": ["string", "boolean", "object"], "minProperties": 1,
                  "maxProperties": 1},
    "description": {"type": "string"},
}
_ANNOTATIONS = frozenset({"title", "description", "markdownDescription", "examples",
                          "x-message", "$comment", "default"})


def _rules(node: Any, root: Mapping[str, Any]) -> Any:
    """A schema without its annotations, its local references expanded."""
    if isinstance(node, list):
        return [_rules(item, root) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = {**root["$defs"][ref[len("#/$defs/"):]],
                **{k: v for k, v in node.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ANNOTATIONS:
            continue
        if key in ("properties", "patternProperties") and isinstance(value, Mapping):
            out[key] = {name: _rules(sub, root) for name, sub in value.items()}
        else:
            out[key] = _rules(value, root)
    return out


@cache
def _quick_resources() -> bool:
    """Whether the template schema's resource entries are what :func:`_settled_resource`
    assumes: a map with a non-empty string ``type``, no other keys than those it names, and
    for those the rules of ``_QUICK_RULES``."""
    root = load_schema("template")
    entry = _rules(root.get("properties", {}).get("resources", {}).get(
        "additionalProperties"), root)
    if not isinstance(entry, Mapping) or set(entry) != {
            "type", "required", "additionalProperties", "properties"}:
        return False
    if entry["type"] != "object" or entry["required"] != ["type"] \
            or entry["additionalProperties"] is not False:
        return False
    properties = entry["properties"]
    return all(properties.get(key) == rule for key, rule in _QUICK_RULES.items())


def _settled_resource(entry: Any) -> bool:
    """Whether a resource entry is valid by the rules of ``_QUICK_RULES`` alone (False:
    the compiled validator decides)."""
    if type(entry) is not dict:
        return False
    rtype = entry.get("type")
    if type(rtype) is not str or not rtype:
        return False
    for key, value in entry.items():
        if key == "type":
            continue
        if key == "properties" or key == "metadata" or key == "update_policy":
            if type(value) is not dict:
                return False
        elif key == "description":
            if type(value) is not str:
                return False
        elif key == "depends_on":
            if type(value) is not str and not (
                    type(value) is list and all(type(item) is str for item in value)):
                return False
        elif key == "condition":
            if type(value) is not str and type(value) is not bool and not (
                    type(value) is dict and len(value) == 1):
                return False
        else:
            return False
    return True


def _unsettled_part(data: Any, kind: Kind) -> Any:
    """The document without the resource entries :func:`_settled_resource` settles: the
    compiled validator's verdict on the rest is its verdict on the whole (nothing in the
    schema relates one entry to another), and costs a fraction on large templates."""
    if kind != "template" or not isinstance(data, dict) or not _quick_resources():
        return data
    resources = data.get("resources")
    if not isinstance(resources, dict):
        return data
    return {**data, "resources": {name: entry for name, entry in resources.items()
                                  if not _settled_resource(entry)}}


@cache
def _entry_validators(kind: Kind) -> dict[str, Callable[[Any], Any]]:
    """Fast validators for the entries of each name-to-definition section (resources, ...)."""
    root = load_schema(kind)
    out: dict[str, Callable[[Any], Any]] = {}
    for section, schema in root.get("properties", {}).items():
        entry = schema.get("additionalProperties") if isinstance(schema, Mapping) else None
        ref = entry.get("$ref") if isinstance(entry, Mapping) else None
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            out[section] = _compile({"$ref": ref}, root)
    return out


def _failing_part(data: Any, kind: Kind) -> Any:
    """The document with the valid entries of its large sections left out.

    jsonschema is about ten times slower than the compiled check: on 100,000 resources with one
    typo it would take seconds to find it. Each entry is checked on its own by the compiled
    validator first, and only those it refuses are kept for jsonschema to explain. Nothing in
    the schemas relates one entry to another, so the errors found are the same, and their paths
    too, as the sections keep their place and the entries their names.
    """
    if not isinstance(data, dict):
        return data
    part = dict(data)
    for section, validate in _entry_validators(kind).items():
        entries = data.get(section)
        if not isinstance(entries, dict):
            continue
        failing = {}
        for name, entry in entries.items():
            try:
                validate(entry)
            except fastjsonschema.JsonSchemaValueException:
                failing[name] = entry
        part[section] = failing
    return part


def _most_specific(error: ValidationError) -> ValidationError:
    """For anyOf/oneOf, the error of the alternative the author most likely meant.

    jsonschema's best_match descends into the alternatives and keeps the deepest error, or the
    anyOf/oneOf error itself when no alternative stands out (then its x-message applies).
    """
    if not error.context:
        return error
    return best_match([error]) or error


def _explain(error: ValidationError, data: Any, root: Mapping[str, Any]
             ) -> Iterator[tuple[tuple[PathItem, ...], str]]:
    """Where the error is, in our path notation, and a plain sentence saying what is wrong."""
    path = _document_path(data, error.absolute_path)
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    instance = error.instance
    keyword = error.validator

    if keyword == "additionalProperties" and isinstance(instance, Mapping):
        known = [k for k in schema.get("properties", {}) if isinstance(k, str)]
        noun = "key" if path else "section"
        # Reported at the key itself, as the version checks that follow do for keys a version
        # lacks, so that the two read alike and point at the line to fix.
        for key in instance:
            if key not in known:
                where = (*path, key if isinstance(key, str) else str(key))
                yield where, f"unknown {noun} {_show(key)}{_suggestion(key, known)}"
        return
    if keyword == "required" and isinstance(instance, Mapping):
        for key in cast(Sequence[str], error.validator_value):
            if key not in instance:
                yield path, f"missing required key {key!r}"
        return

    hint = schema.get("x-message")
    if isinstance(hint, str) and keyword not in _OWN_WORDING:
        candidates = _enum_values(schema, root)
        yield path, f"{hint}; got {_describe(instance)}{_suggestion(instance, candidates)}"
        return
    yield path, _plain_message(error)


def _plain_message(error: ValidationError) -> str:
    """A sentence for an error the schema gives no x-message for."""
    keyword = error.validator
    expected: Any = error.validator_value
    got = _describe(error.instance)
    if keyword == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        words = [_TYPE_WORDS.get(t, t) for t in types]
        return f"must be {' or '.join(words)}; got {got}"
    if keyword == "enum":
        choices = [c for c in expected if isinstance(c, str)]
        listed = ", ".join(_show(c) for c in expected)
        return f"must be one of {listed}; got {got}{_suggestion(error.instance, choices)}"
    if keyword == "minLength" and expected == 1:
        return "must not be empty"
    if keyword == "minProperties" and expected == 1:
        return "must not be an empty mapping"
    if keyword == "maxProperties":
        return f"must have at most {expected} key(s); got {got}"
    if keyword == "minimum":
        return f"must be at least {expected}; got {got}"
    if keyword in ("anyOf", "oneOf"):
        return f"is not any of the accepted forms; got {got}"
    return error.message


def _document_path(data: Any, raw: Sequence[Any]) -> tuple[PathItem, ...]:
    """jsonschema's path into the document, with mapping keys as text.

    YAML keys need not be strings (``1:`` is an integer); written as list indexes they would
    read as positions in a list, so the document is walked to tell keys from indexes.
    """
    out: list[PathItem] = []
    node = data
    for item in raw:
        if isinstance(node, Mapping):
            out.append(item if isinstance(item, str) else str(item))
        else:
            out.append(int(item))
        try:
            node = node[item]
        except (KeyError, IndexError, TypeError):  # pragma: no cover - paths come from the data
            node = None
    return tuple(out)


class _DocumentOrder:
    """Sort keys for paths: the position of each step in its mapping or list."""

    __slots__ = ("_data", "_positions")

    def __init__(self, data: Any) -> None:
        self._data = data
        # Per mapping (by identity), key -> position; built once, as a template may hold
        # 100,000 resources and as many errors.
        self._positions: dict[int, dict[Any, int]] = {}

    def key(self, raw: Sequence[Any]) -> tuple[int, ...]:
        out: list[int] = []
        node = self._data
        for item in raw:
            if isinstance(node, Mapping):
                positions = self._positions.get(id(node))
                if positions is None:
                    positions = {k: i for i, k in enumerate(node)}
                    self._positions[id(node)] = positions
                out.append(positions.get(item, len(positions)))
                node = node.get(item)
            elif isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node):
                out.append(item)
                node = node[item]
            else:  # pragma: no cover - paths come from the data
                break
        return tuple(out)


def _enum_values(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int = 0
                 ) -> list[str]:
    """The strings an enum (possibly inside anyOf/oneOf or behind a local $ref) accepts."""
    if depth > 3:
        return []
    values = [v for v in schema.get("enum", ()) if isinstance(v, str)]
    for alternative in (*schema.get("anyOf", ()), *schema.get("oneOf", ())):
        if isinstance(alternative, Mapping):
            values += _enum_values(alternative, root, depth + 1)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        if isinstance(target, Mapping):
            values += _enum_values(target, root, depth + 1)
    return values


def _suggestion(value: Any, candidates: Sequence[str]) -> str:
    if not isinstance(value, str) or not candidates:
        return ""
    close = difflib.get_close_matches(value, candidates, n=1, cutoff=0.6)
    if not close:
        # Case slips (Type, DELETE) score low on short words; catch them explicitly.
        close = [c for c in candidates if c.lower() == value.lower()][:1]
    return f" (did you mean {close[0]!r}?)" if close else ""


def _show(value: Any) -> str:
    """A value as written in a message: quoted text, short."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(value: Any) -> str:
    """What was found, for the end of a message."""
    if value is None:
        return "an empty value"
    if isinstance(value, Mapping):
        if not value:
            return "an empty mapping"
        keys = ", ".join(_show(k) for k in list(value)[:3])
        more = ", ..." if len(value) > 3 else ""
        return f"a mapping with the key(s) {keys}{more}"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    return _show(value)
