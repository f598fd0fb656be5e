"""The structural check: the JSON Schemas for templates and environments, and their messages."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from jsonschema import Draft202012Validator

from convergence.template.errors import STRUCTURE, Problems
from convergence.template.source import load_document
from convergence.template.structure import (
    Kind,
    _full_validator,
    check_structure,
    load_schema,
    schema_path,
)
from tests.corpus.corpus import ROOT as CORPUS_ROOT
from tests.corpus.corpus import corpus_available, missing_message

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
CORPUS = CORPUS_ROOT.resolve()
DOCUMENT_SUFFIXES = {".yaml", ".yml", ".json", ".template"}
ENVIRONMENT_SECTIONS = ("resource_registry", "parameter_defaults", "parameters")


def check(data: Any, kind: Kind = "template", prefix: tuple[str | int, ...] = ()
          ) -> tuple[bool, list[str]]:
    problems = Problems()
    ok = check_structure(data, kind, problems, prefix)
    assert all(p.kind == STRUCTURE for p in problems)
    assert ok == (not problems)
    return ok, [str(p) for p in problems]


def template(**sections: Any) -> dict[str, Any]:
    return {"heat_template_version": "2021-04-16", **sections}


def resource(**keys: Any) -> dict[str, Any]:
    return template(resources={"web": {"type": "OS::Heat::None", **keys}})


# --- the schemas themselves -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["template", "environment"])
def test_schema_is_valid_draft_2020_12(kind: Kind) -> None:
    schema = load_schema(kind)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema_path(kind).parent.name == "schemas"


def _described_parts(schema: Mapping[str, Any], where: str = "") -> Iterator[tuple[str, Any]]:
    """Every named part of a schema: each entry of its properties and $defs, at any depth."""
    for keyword in ("properties", "$defs"):
        for name, sub in schema.get(keyword, {}).items():
            yield f"{where}/{keyword}/{name}", sub
            yield from _described_parts(sub, f"{where}/{keyword}/{name}")
    for keyword in ("items", "additionalProperties"):
        sub = schema.get(keyword)
        if isinstance(sub, Mapping):
            yield from _described_parts(sub, f"{where}/{keyword}")
    for keyword in ("anyOf", "oneOf"):
        for i, sub in enumerate(schema.get(keyword, ())):
            yield from _described_parts(sub, f"{where}/{keyword}/{i}")


@pytest.mark.parametrize("kind", ["template", "environment"])
def test_every_part_of_the_schema_has_a_title_and_description(kind: Kind) -> None:
    schema = load_schema(kind)
    parts = [("<root>", schema), *_described_parts(schema)]
    assert len(parts) > 15
    for where, part in parts:
        if set(part) == {"$ref"}:  # the referenced definition carries them
            continue
        assert part.get("title"), f"{where} has no title"
        assert part.get("description"), f"{where} has no description"


# --- valid documents ----------------------------------------------------------------------------

VALID_TEMPLATES: list[Any] = [
    {"heat_template_version": "2013-05-23"},
    {"heat_template_version": "rocky", "parameters": None, "resources": None, "outputs": None},
    template(
        description="all sections",
        parameter_groups=[{"label": "a", "description": "b", "parameters": ["p"]}],
        parameters={
            "p": {
                "type": "string", "label": "P", "description": "d", "default": "x",
                "hidden": True, "immutable": False, "tags": ["t"],
                "constraints": [
                    {"length": {"min": 1, "max": 8}, "description": "1 to 8"},
                    {"range": {"min": "1"}},
                    {"modulo": {"step": 2, "offset": 1}},
                    {"allowed_values": ["x", "y"]},
                    {"allowed_pattern": "[a-z]+"},
                    {"custom_constraint": "nova.flavor"},
                ],
            },
            "n": {"type": "number"},
            "l": {"type": "comma_delimited_list", "default": "a,b"},
            "j": {"type": "json", "default": {"k": [1, 2]}},
            "b": {"type": "boolean", "default": False},
        },
        conditions={
            "on": {"get_param": "b"},
            "off": {"not": "on"},
            "always": True,
            "alias": "on",
        },
        resources={
            "a": {
                "type": "OS::Heat::TestResource",
                "properties": {"value": {"str_replace": {"template": "x$y", "params": {}}}},
                "metadata": {"k": "v"},
                "depends_on": ["b"],
                "update_policy": {"rolling_update": {"max_batch_size": 1}},
                "deletion_policy": "Retain",
                "condition": "on",
                "external_id": {"get_param": "p"},
                "description": "Heat accepts a description on resources",
            },
            "b": {"type": "nested.yaml", "depends_on": "c", "deletion_policy": "snapshot"},
            "c": {"type": "OS::Heat::None", "properties": {"get_param": "j"},
                  "deletion_policy": {"get_param": "p"}, "condition": {"equals": [1, 1]}},
            "d": {"type": "OS::Heat::None", "condition": False, "depends_on": []},
        },
        outputs={
            "o": {"value": {"get_attr": ["a", "output"]}, "description": "d", "condition": "on"},
            "p": {"value": None},
        },
    ),
]

VALID_ENVIRONMENTS: list[Any] = [
    None,
    {},
    {
        "parameters": {"p": 1},
        "parameter_defaults": {"q": [1, 2], "r": {"s": True}},
        "resource_registry": {
            "OS::Example::Thing": "OS::Heat::None",
            "OS::Example::Nested": "https://example.com/nested.yaml",
            "OS::Example::*": "OS::Heat::None",
            "OS::Example::Gone": None,
            "resources": {
                "my_server": {"hooks": ["pre-create", "post-update"], "OS::Nova::Server": "s.yaml"},
                "db_*": {"hooks": "pre-delete", "restricted_actions": "replace"},
                "group": {"nested_member": {"restricted_actions": ["update", "replace"]}},
            },
        },
        "event_sinks": [{"type": "zaqar-queue", "target": "q", "ttl": 3600}],
        "encrypted_param_names": ["password"],
        "parameter_merge_strategies": {"default": "overwrite", "a": "merge", "b": "deep_merge"},
    },
]


@pytest.mark.parametrize("data", VALID_TEMPLATES)
def test_valid_templates_pass(data: Any) -> None:
    assert check(data) == (True, [])
    if data is not None:  # both validators must agree, or the fast path lies
        assert _full_validator("template").is_valid(data)


@pytest.mark.parametrize("data", VALID_ENVIRONMENTS)
def test_valid_environments_pass(data: Any) -> None:
    assert check(data, "environment") == (True, [])
    if data is not None:
        assert _full_validator("environment").is_valid(data)


def test_the_check_leaves_the_document_unchanged() -> None:
    # The schema carries defaults for editors; fastjsonschema would write them in if allowed.
    data = template(parameters={"p": {"type": "string"}}, resources={"r": {"type": "X"}})
    before = copy.deepcopy(data)
    check(data)
    assert data == before
    bad = template(parameters={"p": {"type": "strin"}})
    before = copy.deepcopy(bad)
    check(bad)
    assert bad == before


# --- templates: one problem at a time --------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            template(resource={}),
            "resource: unknown section 'resource' (did you mean 'resources'?)",
            id="unknown-section",
        ),
        pytest.param(
            {"heat_template_version": "2021-04-16", "Resources": {}},
            "Resources: unknown section 'Resources' (did you mean 'resources'?)",
            id="cfn-section",
        ),
        pytest.param(
            {"resources": {}},
            "missing required key 'heat_template_version'",
            id="no-version",
        ),
        pytest.param(
            {"heat_template_version": 2016},
            "heat_template_version: must be a version string such as 2018-08-31 or rocky; "
            "got 2016",
            id="version-not-string",
        ),
        pytest.param(
            [1, 2],
            "must be a mapping of template sections (heat_template_version, description, "
            "parameter_groups, parameters, resources, outputs, conditions); got a list of 2 "
            "item(s)",
            id="not-a-mapping",
        ),
        pytest.param(
            None,
            "must be a mapping of template sections (heat_template_version, description, "
            "parameter_groups, parameters, resources, outputs, conditions); got an empty value",
            id="empty-template",
        ),
        pytest.param(
            resource(propertes={}),
            "resources.web.propertes: unknown key 'propertes' (did you mean 'properties'?)",
            id="unknown-resource-key",
        ),
        pytest.param(
            resource(Type="X"),
            "resources.web.Type: unknown key 'Type' (did you mean 'type'?)",
            id="resource-key-case",
        ),
        pytest.param(
            template(resources={"web": {"properties": {}}}),
            "resources.web: missing required key 'type'",
            id="missing-type",
        ),
        pytest.param(
            template(resources={"web": {"type": ""}}),
            "resources.web.type: must be a resource type name, or a template file name or URL "
            "(a non-empty string); got ''",
            id="empty-type",
        ),
        pytest.param(
            template(resources={"web": {"type": {"get_param": "t"}}}),
            "resources.web.type: must be a resource type name, or a template file name or URL "
            "(a non-empty string); got a mapping with the key(s) 'get_param'",
            id="computed-type",
        ),
        pytest.param(
            template(resources={"web": None}),
            "resources.web: must be a resource definition: a mapping with a 'type' and optional "
            "properties, metadata, depends_on, update_policy, deletion_policy, condition and "
            "external_id; got an empty value",
            id="empty-resource",
        ),
        pytest.param(
            resource(depends_on=5),
            "resources.web.depends_on: must be a resource name or a list of resource names; "
            "got 5",
            id="depends-on-number",
        ),
        pytest.param(
            resource(depends_on={"get_resource": "db"}),
            "resources.web.depends_on: must be a resource name or a list of resource names; "
            "got a mapping with the key(s) 'get_resource'",
            id="depends-on-function",
        ),
        pytest.param(
            resource(depends_on=["db", ["cache"]]),
            "resources.web.depends_on[1]: must be a resource name (a string); got a list of 1 "
            "item(s)",
            id="depends-on-nested-list",
        ),
        pytest.param(
            resource(deletion_policy="Destroy"),
            "resources.web.deletion_policy: must be Delete, Retain or Snapshot (or a function "
            "returning one of them); got 'Destroy'",
            id="deletion-policy",
        ),
        pytest.param(
            resource(deletion_policy="Retian"),
            "resources.web.deletion_policy: must be Delete, Retain or Snapshot (or a function "
            "returning one of them); got 'Retian' (did you mean 'Retain'?)",
            id="deletion-policy-typo",
        ),
        pytest.param(
            resource(deletion_policy={"get_param": "a", "get_attr": "b"}),
            "resources.web.deletion_policy: must be a function call: a mapping with exactly one "
            "key, the function name; got a mapping with the key(s) 'get_param', 'get_attr'",
            id="deletion-policy-two-keys",
        ),
        pytest.param(
            resource(properties=["a"]),
            "resources.web.properties: must be a mapping of property names to values; "
            "got a list of 1 item(s)",
            id="properties-list",
        ),
        pytest.param(
            resource(properties=None),
            "resources.web.properties: must be a mapping of property names to values; "
            "got an empty value",
            id="properties-empty",
        ),
        pytest.param(
            resource(condition=1),
            "resources.web.condition: must be a condition name, true or false, or a condition "
            "function such as {equals: [...]}; got 1",
            id="condition-number",
        ),
        pytest.param(
            resource(condition={"equals": [1, 1], "not": True}),
            "resources.web.condition: must be a condition name, true or false, or a condition "
            "function such as {equals: [...]}; got a mapping with the key(s) 'equals', 'not'",
            id="condition-two-functions",
        ),
        pytest.param(
            resource(external_id=["x"]),
            "resources.web.external_id: must be a string or a function call returning one; "
            "got a list of 1 item(s)",
            id="external-id",
        ),
        pytest.param(
            template(resources=[{"type": "X"}]),
            "resources: must be a mapping of resource names to resource definitions (or left "
            "empty); got a list of 1 item(s)",
            id="resources-list",
        ),
        pytest.param(
            template(parameters={"p": {"type": "string", "hiden": True}}),
            "parameters.p.hiden: unknown key 'hiden' (did you mean 'hidden'?)",
            id="parameter-key",
        ),
        pytest.param(
            template(parameters={"p": {"type": "String"}}),
            "parameters.p.type: must be one of 'string', 'number', 'comma_delimited_list', "
            "'json', 'boolean'; got 'String' (did you mean 'string'?)",
            id="parameter-type-cfn",
        ),
        pytest.param(
            template(parameters={"p": {"type": "list"}}),
            "parameters.p.type: must be one of 'string', 'number', 'comma_delimited_list', "
            "'json', 'boolean'; got 'list'",
            id="parameter-type-unknown",
        ),
        pytest.param(
            template(parameters={"p": {"default": 1}}),
            "parameters.p: missing required key 'type'",
            id="parameter-no-type",
        ),
        pytest.param(
            template(parameters={"p": {"type": "string", "hidden": "yes"}}),
            "parameters.p.hidden: must be true or false; got 'yes'",
            id="parameter-hidden",
        ),
        pytest.param(
            template(parameters={"p": {"type": "string", "tags": "a"}}),
            "parameters.p.tags: must be a list of strings; got 'a'",
            id="parameter-tags",
        ),
        pytest.param(
            template(parameters={"p": {"type": "string", "constraints": {"length": {}}}}),
            "parameters.p.constraints: must be a list of constraints; got a mapping with the "
            "key(s) 'length'",
            id="constraints-not-list",
        ),
        pytest.param(
            template(parameters={"p": {"type": "number", "constraints": [
                {"range": {"min": 1}, "length": {"max": 2}}]}}),
            "parameters.p.constraints[0]: must be a mapping naming exactly one constraint "
            "(length, range, modulo, allowed_values, allowed_pattern or custom_constraint), plus "
            "an optional description; got a mapping with the key(s) 'range', 'length'",
            id="constraint-two-kinds",
        ),
        pytest.param(
            template(parameters={"p": {"type": "number", "constraints": [
                {"description": "alone"}]}}),
            "parameters.p.constraints[0]: must be a mapping naming exactly one constraint "
            "(length, range, modulo, allowed_values, allowed_pattern or custom_constraint), plus "
            "an optional description; got a mapping with the key(s) 'description'",
            id="constraint-none",
        ),
        pytest.param(
            template(parameters={"p": {"type": "number", "constraints": [
                {"range": {"minimum": 1}}]}}),
            "parameters.p.constraints[0].range.minimum: unknown key 'minimum' (did you mean "
            "'min'?)",
            id="constraint-range-key",
        ),
        pytest.param(
            template(parameters={"p": {"type": "number", "constraints": [
                {"range": {"min": "one"}}]}}),
            "parameters.p.constraints[0].range.min: must be a number; got 'one'",
            id="constraint-range-value",
        ),
        pytest.param(
            template(parameters={"p": {"type": "number", "constraints": [{"range": {}}]}}),
            "parameters.p.constraints[0].range: must be a mapping with 'min', 'max' or both; "
            "got an empty mapping",
            id="constraint-range-empty",
        ),
        pytest.param(
            template(parameters={"p": {"type": "number", "constraints": [
                {"modulo": {"step": 2}}]}}),
            "parameters.p.constraints[0].modulo: missing required key 'offset'",
            id="constraint-modulo",
        ),
        pytest.param(
            template(parameters={"p": {"type": "string", "constraints": [
                {"allowed_values": "a,b"}]}}),
            "parameters.p.constraints[0].allowed_values: must be a list of values; got 'a,b'",
            id="constraint-allowed-values",
        ),
        pytest.param(
            template(parameter_groups=[{"label": "x"}]),
            "parameter_groups[0]: missing required key 'parameters'",
            id="group-no-parameters",
        ),
        pytest.param(
            template(parameter_groups={"label": "x"}),
            "parameter_groups: must be a list of parameter groups (or left empty); got a mapping "
            "with the key(s) 'label'",
            id="groups-not-list",
        ),
        pytest.param(
            template(outputs={"o": {"description": "no value"}}),
            "outputs.o: missing required key 'value'",
            id="output-no-value",
        ),
        pytest.param(
            template(outputs={"o": {"value": 1, "vaule": 2}}),
            "outputs.o.vaule: unknown key 'vaule' (did you mean 'value'?)",
            id="output-unknown-key",
        ),
        pytest.param(
            template(conditions=None),
            "conditions: must be a mapping of condition names to condition definitions; "
            "got an empty value",
            id="conditions-empty",
        ),
        pytest.param(
            template(conditions={"c": [True]}),
            "conditions.c: must be a condition name, true or false, or a condition function "
            "such as {equals: [...]}; got a list of 1 item(s)",
            id="condition-list",
        ),
        pytest.param(
            template(description=["a"]),
            "description: must be a string; got a list of 1 item(s)",
            id="description",
        ),
    ],
)
def test_template_problem(data: Any, expected: str) -> None:
    assert check(data) == (False, [expected])


def test_non_string_keys_are_shown_as_names_not_indexes() -> None:
    # YAML reads `1:` as an integer key; it must not read as a list index `resources[1]`.
    ok, problems = check(template(resources={1: {"type": ""}}))
    assert not ok
    assert problems[0].startswith("resources.1.type: ")


def test_several_problems_are_reported_at_once_in_document_order() -> None:
    data = {
        "heat_template_version": "2021-04-16",
        "parameters": {"size": {"type": "Number"}},
        "resources": {
            "web": {"type": "OS::Nova::Server", "propertes": {}, "depends_on": [1]},
            "fine": {"type": "OS::Heat::None"},
            "db": {"properties": {}, "deletion_policy": "Keep"},
        },
        "outputs": {"url": {"description": "no value"}},
        "outptus": {},
    }
    ok, problems = check(data)
    assert not ok
    assert problems == [
        "outptus: unknown section 'outptus' (did you mean 'outputs'?)",
        "parameters.size.type: must be one of 'string', 'number', 'comma_delimited_list', "
        "'json', 'boolean'; got 'Number' (did you mean 'number'?)",
        "resources.web.propertes: unknown key 'propertes' (did you mean 'properties'?)",
        "resources.web.depends_on[0]: must be a resource name (a string); got 1",
        "resources.db: missing required key 'type'",
        "resources.db.deletion_policy: must be Delete, Retain or Snapshot (or a function "
        "returning one of them); got 'Keep'",
        "outputs.url: missing required key 'value'",
    ]


def test_every_bad_resource_of_a_large_template_is_reported() -> None:
    resources: dict[str, Any] = {f"r{i}": {"type": "OS::Heat::None"} for i in range(2000)}
    for i in (5, 1500, 1999):
        resources[f"r{i}"]["depends_on"] = {"r0": True}
    ok, problems = check(template(resources=resources))
    assert not ok
    assert [p.split(":")[0] for p in problems] == [
        "resources.r5.depends_on", "resources.r1500.depends_on", "resources.r1999.depends_on"
    ]


def test_prefix_is_put_in_front_of_every_path() -> None:
    ok, problems = check(resource(depends_on=5), prefix=("files", "nested.yaml"))
    assert not ok
    assert problems[0].startswith("files.nested.yaml.resources.web.depends_on: ")
    ok, problems = check([1], prefix=("nested",))
    assert problems[0].startswith("nested: must be a mapping of template sections")


def test_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        schema_path("stack")  # type: ignore[arg-type]


# --- environments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"resource_registy": {}},
            "resource_registy: unknown section 'resource_registy' (did you mean "
            "'resource_registry'?)",
            id="unknown-section",
        ),
        pytest.param(
            {"parameters": {}, "heat_template_version": "2021-04-16"},
            "heat_template_version: unknown section 'heat_template_version'",
            id="template-section",
        ),
        pytest.param(
            {"parameter_defaults": None},
            "parameter_defaults: must be a mapping of parameter names to values (Heat refuses an "
            "empty section); got an empty value",
            id="empty-section",
        ),
        pytest.param(
            {"parameter_merge_strategies": {"p": "deepmerge"}},
            "parameter_merge_strategies.p: must be one of 'overwrite', 'merge', 'deep_merge'; "
            "got 'deepmerge' (did you mean 'deep_merge'?)",
            id="merge-strategy",
        ),
        pytest.param(
            {"resource_registry": {"OS::X": 1}},
            "resource_registry.OS::X: must be a resource type, a template file name or URL, or "
            "empty to remove the mapping; got 1",
            id="registry-mapping",
        ),
        pytest.param(
            {"resource_registry": {"resources": {"server": {"hooks": "pre-craete"}}}},
            "resource_registry.resources.server.hooks: must be a hook (pre-create, pre-update, "
            "pre-delete, post-create, post-update, post-delete) or a list of hooks; got "
            "'pre-craete' (did you mean 'pre-create'?)",
            id="hook",
        ),
        pytest.param(
            {"resource_registry": {"resources": {"g": {"m": {"restricted_actions": ["delete"]}}}}},
            "resource_registry.resources.g.m.restricted_actions[0]: must be one of 'update', "
            "'replace'; got 'delete'",
            id="nested-restricted-action",
        ),
        pytest.param(
            {"resource_registry": {"resources": {"server": {"OS::Nova::Server": 5}}}},
            "resource_registry.resources.server.OS::Nova::Server: must be a type mapping (a "
            "string, or empty) or the overrides of a nested resource (a mapping); got 5",
            id="override-value",
        ),
        pytest.param(
            {"event_sinks": [{"target": "q"}]},
            "event_sinks[0]: missing required key 'type'",
            id="event-sink-type",
        ),
        pytest.param(
            {"encrypted_param_names": "password"},
            "encrypted_param_names: must be a list of parameter names (Heat refuses an empty "
            "section); got 'password'",
            id="encrypted-names",
        ),
        pytest.param(
            ["parameters"],
            "must be a mapping of environment sections (parameters, parameter_defaults, "
            "resource_registry, event_sinks, encrypted_param_names, parameter_merge_strategies); "
            "got a list of 1 item(s)",
            id="not-a-mapping",
        ),
    ],
)
def test_environment_problem(data: Any, expected: str) -> None:
    assert check(data, "environment") == (False, [expected])


def test_several_environment_problems_at_once() -> None:
    ok, problems = check(
        {
            "parameter_defualts": {},
            "parameter_merge_strategies": {"a": "append", "b": "merge"},
            "event_sinks": [{"type": "zaqar-queue", "ttl": -1}],
        },
        "environment",
    )
    assert not ok
    assert problems == [
        "parameter_defualts: unknown section 'parameter_defualts' (did you mean "
        "'parameter_defaults'?)",
        "parameter_merge_strategies.a: must be one of 'overwrite', 'merge', 'deep_merge'; "
        "got 'append'",
        "event_sinks[0].ttl: must be a number of seconds; got -1",
    ]


# --- real documents ----------------------------------------------------------------------------


def classify(data: Any) -> Kind | None:
    """Template: has heat_template_version. Environment: has an environment section but not it."""
    if not isinstance(data, dict):
        return None
    if "heat_template_version" in data:
        return "template"
    if any(section in data for section in ENVIRONMENT_SECTIONS):
        return "environment"
    return None


def documents_under(folder: Path) -> list[Any]:
    """One pytest param per template or environment file under ``folder`` (none if missing)."""
    if not folder.is_dir():
        return []
    found: list[Any] = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.suffix not in DOCUMENT_SUFFIXES:
            continue
        text = path.read_bytes()
        rel = path.relative_to(folder).as_posix()
        try:
            data = load_document(text, str(path))
        except ValueError as exc:
            # Not YAML at all (say, a Jinja .template) is not ours to judge; a template that does
            # not load is a failure, not something to skip quietly.
            if b"heat_template_version" in text:
                found.append(pytest.param(str(exc), "unloadable", id=rel))
            continue
        kind = classify(data)
        if kind is not None:
            found.append(pytest.param(data, kind, id=rel))
    return found


def assert_real_document_passes(data: Any, kind: str) -> None:
    # kind "unloadable": the file looked like a template but did not load; data is the error.
    assert kind in ("template", "environment"), data
    ok, problems = check(data, cast(Kind, kind))
    assert ok, "\n".join(problems)


@pytest.mark.parametrize(("data", "kind"), documents_under(EXAMPLES))
def test_example_documents_pass(data: Any, kind: str) -> None:
    assert_real_document_passes(data, kind)


def test_corpus_is_present() -> None:
    if not corpus_available():
        if os.environ.get("CI"):
            pytest.fail(missing_message())
        pytest.skip(missing_message())
    assert documents_under(CORPUS), f"no template or environment found under {CORPUS}"


@pytest.mark.corpus
@pytest.mark.parametrize(("data", "kind"), documents_under(CORPUS))
def test_corpus_documents_pass(data: Any, kind: str) -> None:
    assert_real_document_passes(data, kind)
