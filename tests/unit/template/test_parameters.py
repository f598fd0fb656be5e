"""Parameter definitions, conversions of values to their types, and a stack's values."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.template.constraints import (
    AllowedValues,
    CustomConstraint,
    CustomConstraintRegistry,
    Length,
    Modulo,
    Range,
)
from convergence.template.errors import PARAMETER, Problems, TemplateError
from convergence.template.parameters import (
    NO_DEFAULT,
    ParameterSchema,
    coerce,
    parse_parameters,
    resolve_values,
)


def parse(section: Any, *, tags: bool = True, modulo: bool = True,
          version: str = "2018-08-31") -> tuple[dict[str, ParameterSchema], list[str]]:
    problems = Problems()
    schemas = parse_parameters(section, version, problems, tags_allowed=tags,
                               modulo_allowed=modulo)
    assert all(p.kind == PARAMETER for p in problems)
    return schemas, [str(p) for p in problems]


def one(definition: dict[str, Any], **kwargs: Any) -> ParameterSchema:
    schemas, errors = parse({"p": definition}, **kwargs)
    assert errors == []
    return schemas["p"]


def convert(param_type: str, value: Any, hidden: bool = False) -> Any:
    return coerce(ParameterSchema("p", param_type, hidden=hidden), value, ("parameters", "p"))


def refused(param_type: str, value: Any, hidden: bool = False) -> str:
    with pytest.raises(TemplateError) as info:
        convert(param_type, value, hidden)
    assert info.value.kinds == {PARAMETER}
    return str(info.value)


# -- definitions -----------------------------------------------------------------------------


def test_full_definition() -> None:
    schema = one({
        "type": "string", "label": "Flavor", "description": "The flavor", "default": "m1.small",
        "hidden": False, "immutable": True, "tags": ["role", "size"],
        "constraints": [{"allowed_values": ["m1.small", "m1.large"]}],
    })
    assert schema == ParameterSchema(
        name="p", type="string", label="Flavor", description="The flavor", default="m1.small",
        hidden=False, immutable=True, tags=("role", "size"),
        constraints=(AllowedValues(("m1.small", "m1.large")),))
    assert not schema.required
    assert schema.has_default


@pytest.mark.parametrize("param_type", ["string", "number", "boolean", "json",
                                        "comma_delimited_list"])
def test_every_type_is_accepted(param_type: str) -> None:
    schema = one({"type": param_type})
    assert schema.type == param_type
    assert schema.default is NO_DEFAULT
    assert schema.required


def test_null_default_is_no_default_as_in_heat() -> None:
    schema = one({"type": "string", "default": None})
    assert schema.default is NO_DEFAULT
    assert schema.required


def test_empty_string_default_is_a_default() -> None:
    assert not one({"type": "string", "default": ""}).required


def test_empty_or_missing_section() -> None:
    assert parse(None) == ({}, [])
    assert parse({}) == ({}, [])
    assert parse(["p"]) == ({}, ["parameters: parameters must be a map of parameter "
                                 "definitions"])


def test_definition_must_be_a_map_but_the_name_stays_defined() -> None:
    schemas, errors = parse({"p": "string"})
    assert errors == ["parameters.p: parameter 'p' must be a map with at least a type"]
    assert schemas["p"].type == "string"


def test_name_must_be_a_string() -> None:
    assert parse({1: {"type": "string"}})[1] == [
        "parameters.1: a parameter name must be a string, not 1"]


def test_type_is_required_and_must_be_known() -> None:
    assert parse({"p": {"default": 1}})[1] == [
        "parameters.p: parameter 'p' has no type; give one of string, number, "
        "comma_delimited_list, json, boolean"]
    assert parse({"p": {"type": "String"}})[1] == [
        "parameters.p.type: unknown parameter type 'String'; the types are string, number, "
        "comma_delimited_list, json, boolean; did you mean 'string'?"]
    assert parse({"p": {"type": "CommaDelimitedList"}})[1] == [
        "parameters.p.type: unknown parameter type 'CommaDelimitedList'; the types are string, "
        "number, comma_delimited_list, json, boolean; did you mean 'comma_delimited_list'?"]
    assert parse({"p": {"type": "float"}})[1] == [
        "parameters.p.type: unknown parameter type 'float'; the types are string, number, "
        "comma_delimited_list, json, boolean"]


def test_unknown_key_is_named() -> None:
    assert parse({"p": {"type": "string", "defualt": "x"}})[1] == [
        "parameters.p.defualt: unknown key 'defualt' in parameter 'p'; the keys are "
        "constraints, default, description, hidden, immutable, label, tags, type; did you mean "
        "'default'?"]


def test_schema_key_is_accepted_and_ignored_as_in_heat() -> None:
    assert one({"type": "json", "schema": {"a": 1}}).type == "json"


def test_tags_need_queens() -> None:
    schemas, errors = parse({"p": {"type": "string", "tags": ["a"]}}, tags=False,
                            version="2017-09-01")
    assert errors == ["parameters.p.tags: 'tags' needs heat_template_version 2018-03-02 or "
                      "later (this template is 2017-09-01)"]
    assert schemas["p"].tags == ()
    assert parse({"p": {"type": "string", "tags": "a"}})[1] == [
        "parameters.p.tags: tags must be a list"]


def test_modulo_needs_ocata() -> None:
    definition = {"type": "number", "constraints": [{"modulo": {"step": 2, "offset": 0}}]}
    assert one(definition).constraints == (Modulo(2, 0),)
    assert parse({"p": definition}, modulo=False, version="2016-10-14")[1] == [
        "parameters.p.constraints[0].modulo: the modulo constraint needs heat_template_version "
        "2017-02-24 or later (this template is 2016-10-14)"]


def test_constraints_are_checked_against_the_type() -> None:
    assert parse({"p": {"type": "string", "constraints": [{"range": {"min": 1}}]}})[1] == [
        "parameters.p.constraints[0].range: a range constraint does not apply to a string "
        "parameter (it applies to number)"]


def test_hidden_and_immutable_follow_truth_as_in_heat() -> None:
    assert one({"type": "string", "hidden": True}).hidden
    assert one({"type": "string", "hidden": "yes"}).hidden
    assert not one({"type": "string"}).hidden
    assert one({"type": "string", "immutable": 1}).immutable
    assert not one({"type": "string", "immutable": False}).immutable


def test_label_and_description_must_be_text() -> None:
    assert one({"type": "string", "description": 42}).description == "42"
    assert parse({"p": {"type": "string", "label": ["x"]}})[1] == [
        "parameters.p.label: label must be a string"]


def test_default_must_have_the_type() -> None:
    assert parse({"p": {"type": "number", "default": "ten"}})[1] == [
        "parameters.p.default: the default is not valid: 'ten' is not a number"]
    assert parse({"p": {"type": "boolean", "default": "maybe"}})[1] == [
        "parameters.p.default: the default is not valid: 'maybe' is not a boolean; use one of "
        "0, 1, f, false, n, no, off, on, t, true, y, yes"]
    assert parse({"p": {"type": "json", "default": "{oops"}})[1][0].startswith(
        "parameters.p.default: the default is not valid: '{oops' is not valid JSON: ")


def test_default_must_meet_the_constraints() -> None:
    assert parse({"p": {"type": "number", "default": 20,
                        "constraints": [{"range": {"max": 10}}]}})[1] == [
        "parameters.p.default: the default is not valid: 20 is out of range; it must be at "
        "most 10 (constraints[0], range)"]
    # A comma-delimited default is split before its length is checked.
    assert parse({"p": {"type": "comma_delimited_list", "default": "a,b,c",
                        "constraints": [{"length": {"max": 2}}]}})[1] == [
        "parameters.p.default: the default is not valid: the length is 3; it must be at most 2 "
        "(constraints[0], length)"]
    assert parse({"p": {"type": "string", "default": "abc",
                        "constraints": [{"length": {"min": 5}, "description": "5 or more"}]}}
                 )[1] == ["parameters.p.default: the default is not valid: 5 or more "
                          "(constraints[0], length)"]


def test_default_is_not_checked_against_custom_constraints() -> None:
    schema = one({"type": "string", "default": "m1.x",
                  "constraints": [{"custom_constraint": "nova.flavor"}]})
    assert schema.default == "m1.x"


def test_hidden_default_never_appears_in_messages() -> None:
    errors = parse({"p": {"type": "string", "hidden": True, "default": "t0psecret",
                          "constraints": [{"allowed_pattern": "[0-9]+"}]},
                    "q": {"type": "number", "hidden": True, "default": "t0psecret"}})[1]
    assert errors == [
        "parameters.p.default: the default is not valid: the value does not match the pattern "
        "'[0-9]+' (constraints[0], allowed_pattern)",
        "parameters.q.default: the default is not valid: the value is not a number",
    ]
    assert not any("t0psecret" in e for e in errors)


def test_all_problems_are_collected() -> None:
    errors = parse({
        "a": {"type": "strng"},
        "b": {"type": "number", "constraints": [{"length": {"min": 1}}]},
        "c": {"type": "string", "bogus": 1, "default": 5,
              "constraints": [{"allowed_values": ["x"]}]},
    })[1]
    assert errors == [
        "parameters.a.type: unknown parameter type 'strng'; the types are string, number, "
        "comma_delimited_list, json, boolean",
        "parameters.b.constraints[0].length: a length constraint does not apply to a number "
        "parameter (it applies to comma_delimited_list, json, string)",
        "parameters.c.bogus: unknown key 'bogus' in parameter 'c'; the keys are constraints, "
        "default, description, hidden, immutable, label, tags, type",
        "parameters.c.default: the default is not valid: '5' is not an allowed value "
        "(allowed: 'x') (constraints[0], allowed_values)",
    ]


# -- conversions -----------------------------------------------------------------------------


def test_string_conversion_is_heats_str() -> None:
    assert convert("string", "abc") == "abc"
    assert convert("string", 5) == "5"
    assert convert("string", 1.5) == "1.5"
    assert convert("string", True) == "True"
    assert convert("string", "") == ""


@pytest.mark.parametrize(("raw", "number"), [
    (3, 3), (2.5, 2.5), ("42", 42), ("-1", -1), ("0.5", 0.5), ("1e2", 100.0), (" 7 ", 7),
])
def test_number_conversion(raw: Any, number: float) -> None:
    result = convert("number", raw)
    assert result == number
    assert type(result) is type(number)


@pytest.mark.parametrize(("raw", "shown"), [
    ("ten", "'ten'"), ("", "''"), (True, "True"), ([1], "[1]"), ({"a": 1}, "{'a': 1}"),
])
def test_number_refused(raw: Any, shown: str) -> None:
    assert refused("number", raw) == f"parameters.p: {shown} is not a number"


@pytest.mark.parametrize(("raw", "value"), [
    (True, True), (False, False), ("true", True), ("False", False), ("yes", True),
    ("no", False), ("1", True), ("0", False), ("t", True), ("f", False), ("on", True),
    ("off", False), ("y", True), ("n", False), (1, True), (0, False), (" TRUE ", True),
])
def test_boolean_conversion(raw: Any, value: bool) -> None:
    assert convert("boolean", raw) is value


def test_boolean_refused() -> None:
    assert refused("boolean", "maybe") == (
        "parameters.p: 'maybe' is not a boolean; use one of 0, 1, f, false, n, no, off, on, t, "
        "true, y, yes")
    assert refused("boolean", 2).startswith("parameters.p: 2 is not a boolean")


def test_comma_delimited_list_conversion() -> None:
    assert convert("comma_delimited_list", "a,b,c") == ["a", "b", "c"]
    # Heat's delim_string_to_list keeps the spaces around items.
    assert convert("comma_delimited_list", "a, b ,c") == ["a", " b ", "c"]
    assert convert("comma_delimited_list", "") == []
    assert convert("comma_delimited_list", "single") == ["single"]
    assert convert("comma_delimited_list", "a,,b") == ["a", "", "b"]
    assert convert("comma_delimited_list", ["x", 1, True]) == ["x", "1", "True"]
    assert convert("comma_delimited_list", []) == []


def test_comma_delimited_list_refused() -> None:
    assert refused("comma_delimited_list", 5) == (
        "parameters.p: 5 is not a comma-delimited string or a list")
    assert refused("comma_delimited_list", {"a": 1}) == (
        "parameters.p: {'a': 1} is not a comma-delimited string or a list")


def test_json_conversion() -> None:
    assert convert("json", '{"a": [1, 2]}') == {"a": [1, 2]}
    assert convert("json", "[1, 2]") == [1, 2]
    assert convert("json", {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert convert("json", [1, "x"]) == [1, "x"]
    # The JSON round trip Heat makes turns keys into strings.
    assert convert("json", {1: "one"}) == {"1": "one"}
    # Heat passes an empty string through and accepts any JSON value.
    assert convert("json", "") == ""
    assert convert("json", "5") == 5
    original = {"a": [1]}
    converted = convert("json", original)
    converted["a"].append(2)
    assert original == {"a": [1]}


def test_json_refused() -> None:
    assert refused("json", "{not json").startswith(
        "parameters.p: '{not json' is not valid JSON: Expecting property name")
    assert refused("json", {"a": object()}).startswith(
        "parameters.p: {'a': <object object at")


def test_conversion_errors_of_hidden_values_say_the_value() -> None:
    for param_type, raw in [("number", "s3cr3t"), ("boolean", "s3cr3t"),
                            ("json", "s3cr3t"), ("comma_delimited_list", 12345)]:
        message = refused(param_type, raw, hidden=True)
        assert message.startswith("parameters.p: the value ")
        assert "s3cr3t" not in message and "12345" not in message


# -- values ----------------------------------------------------------------------------------


SCHEMAS = {
    "flavor": ParameterSchema("flavor", "string", default="m1.small",
                              constraints=(AllowedValues(("m1.small", "m1.large")),)),
    "count": ParameterSchema("count", "number", constraints=(Range(1, 5),)),
    "debug": ParameterSchema("debug", "boolean", default=False),
    "nets": ParameterSchema("nets", "comma_delimited_list", default="a,b"),
    "extra": ParameterSchema("extra", "json", default={}),
    "password": ParameterSchema("password", "string", hidden=True,
                                constraints=(Length(8, None),)),
}


def resolve(given: dict[str, Any], defaults: dict[str, Any] | None = None, *,
            require_all: bool = True, schemas: dict[str, ParameterSchema] | None = None,
            **kwargs: Any) -> tuple[dict[str, Any], list[str]]:
    problems = Problems()
    values = resolve_values(SCHEMAS if schemas is None else schemas, given, defaults or {},
                            problems, require_all=require_all, **kwargs)
    assert all(p.kind == PARAMETER for p in problems)
    return values, [str(p) for p in problems]


def test_values_come_converted_from_given_then_parameter_defaults_then_template() -> None:
    values, errors = resolve({"count": "3", "password": "longenough", "debug": "yes"},
                             {"flavor": "m1.large", "count": 9, "nets": ["x"]})
    assert errors == []
    assert values == {"flavor": "m1.large", "count": 3, "debug": True, "nets": ["x"],
                      "extra": {}, "password": "longenough"}


def test_null_values_count_as_none() -> None:
    values, errors = resolve({"count": None, "password": "longenough"}, {"count": 2,
                                                                         "flavor": None})
    assert errors == []
    assert values["count"] == 2
    assert values["flavor"] == "m1.small"


def test_unknown_given_names_are_errors_but_not_parameter_defaults() -> None:
    values, errors = resolve({"count": 1, "password": "longenough", "flavour": "x",
                              "OS::stack_name": "s"}, {"NestedOnly": 1})
    assert errors == [
        "parameters.flavour: the template has no parameter 'flavour'; did you mean 'flavor'?",
        "parameters.OS::stack_name: the template has no parameter 'OS::stack_name'",
    ]
    assert "NestedOnly" not in values


def test_missing_required_values_only_when_required() -> None:
    values, errors = resolve({})
    assert errors == [
        "parameters.count: parameter 'count' needs a value: the template gives it no default "
        "and none was supplied",
        "parameters.password: parameter 'password' needs a value: the template gives it no "
        "default and none was supplied",
    ]
    values, errors = resolve({}, require_all=False)
    assert errors == []
    assert values == {"flavor": "m1.small", "debug": False, "nets": ["a", "b"], "extra": {}}


def test_conversion_failures_name_where_the_value_came_from() -> None:
    values, errors = resolve({"count": "many", "password": "longenough"},
                             {"debug": "perhaps"})
    assert errors == [
        "parameters.count: 'many' is not a number",
        "parameter_defaults.debug: 'perhaps' is not a boolean; use one of 0, 1, f, false, n, "
        "no, off, on, t, true, y, yes",
    ]
    assert "count" not in values and "debug" not in values


def test_constraint_failures_name_the_constraint() -> None:
    values, errors = resolve({"count": 7, "flavor": "m1.huge", "password": "longenough"})
    assert errors == [
        "parameters.flavor: 'm1.huge' is not an allowed value (allowed: 'm1.small', "
        "'m1.large') (constraints[0], allowed_values)",
        "parameters.count: 7 is out of range; it must be between 1 and 5 (constraints[0], "
        "range)",
    ]
    assert values["count"] == 7  # still given, so that later checks have something to use


def test_hidden_values_are_absent_from_messages() -> None:
    schemas = {"password": ParameterSchema("password", "number", hidden=True,
                                           constraints=(Range(100, None),))}
    for given in ({"password": "hunter2"}, {"password": 42}):
        errors = resolve(given, schemas=schemas)[1]
        assert len(errors) == 1
        assert "hunter2" not in errors[0] and "42" not in errors[0]
    errors = resolve({"password": "short", "count": 1})[1]
    assert errors == ["parameters.password: the length is 5; it must be at least 8 "
                      "(constraints[0], length)"]


def test_custom_constraints_apply_to_every_value_including_the_template_default() -> None:
    custom = CustomConstraintRegistry({"nova.flavor": lambda v: f"no flavor {v!r}"})
    schemas = {"flavor": ParameterSchema("flavor", "string", default="m1.tiny",
                                         constraints=(CustomConstraint("nova.flavor"),))}
    assert resolve({}, schemas=schemas, custom=custom)[1] == [
        "parameters.flavor.default: no flavor 'm1.tiny' (constraints[0], custom_constraint)"]
    assert resolve({"flavor": "m1.big"}, schemas=schemas, custom=custom)[1] == [
        "parameters.flavor: no flavor 'm1.big' (constraints[0], custom_constraint)"]
    assert resolve({"flavor": "m1.big"}, schemas=schemas)[1] == []


def test_a_bad_template_default_is_not_reported_twice() -> None:
    schemas = {"n": ParameterSchema("n", "number", default="ten")}
    values, errors = resolve({}, schemas=schemas)
    assert errors == []  # parse_parameters reported it
    assert values == {}
