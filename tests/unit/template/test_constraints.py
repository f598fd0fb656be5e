"""Parameter constraints: parsing each kind with its shape errors, and checking values."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.template.constraints import (
    NO_CUSTOM_CONSTRAINTS,
    AllowedPattern,
    AllowedValues,
    Constraint,
    CustomConstraint,
    CustomConstraintRegistry,
    Length,
    Modulo,
    Range,
    check_value,
    parse_constraints,
)
from convergence.template.conversions import (
    BOOLEAN,
    COMMA_DELIMITED_LIST,
    JSON,
    NUMBER,
    STRING,
    bool_from_string,
    str_to_num,
)
from convergence.template.errors import PARAMETER, Problems

PATH = ("parameters", "p", "constraints")


def parse(data: Any, param_type: str | None = STRING,
          modulo_allowed: bool = True) -> tuple[tuple[Constraint, ...], list[str]]:
    problems = Problems()
    found = parse_constraints(data, param_type, PATH, problems, modulo_allowed=modulo_allowed,
                              version_name="2016-10-14")
    assert all(p.kind == PARAMETER for p in problems)
    return found, [str(p) for p in problems]


def messages(constraints: tuple[Constraint, ...], value: Any, param_type: str,
             **kwargs: Any) -> list[str]:
    return [v.message for v in check_value(constraints, value, param_type, **kwargs)]


# -- parsing ---------------------------------------------------------------------------------


def test_parses_every_kind_with_descriptions() -> None:
    found, errors = parse([
        {"length": {"min": 1, "max": 8}, "description": "1 to 8"},
        {"allowed_pattern": "[a-z]+"},
        {"allowed_values": ["a", "b"]},
        {"custom_constraint": "nova.keypair"},
    ])
    assert errors == []
    assert found == (Length(1, 8, "1 to 8"), AllowedPattern("[a-z]+"),
                     AllowedValues(("a", "b")), CustomConstraint("nova.keypair"))
    found, errors = parse([{"range": {"min": 0.5}}, {"modulo": {"step": 2, "offset": 1}}],
                          NUMBER)
    assert errors == []
    assert found == (Range(0.5, None), Modulo(2, 1))


def test_none_means_no_constraints() -> None:
    assert parse(None) == ((), [])


def test_constraints_must_be_a_list_of_maps() -> None:
    assert parse({"length": {"min": 1}})[1] == [
        "parameters.p.constraints: constraints must be a list, not a map"]
    assert parse(["x"])[1] == ["parameters.p.constraints[0]: a constraint must be a map such "
                               "as {length: {min: 1}}"]


def test_unknown_constraint_key_is_named() -> None:
    found, errors = parse([{"lenght": {"min": 1}}])
    assert found == ()
    assert errors == [
        "parameters.p.constraints[0].lenght: unknown constraint 'lenght'; the constraints are "
        "modulo, range, length, allowed_values, allowed_pattern, custom_constraint"]


def test_entry_with_only_a_description_expresses_nothing() -> None:
    assert parse([{"description": "x"}])[1] == [
        "parameters.p.constraints[0]: the constraint expresses nothing: give one of modulo, "
        "range, length, allowed_values, allowed_pattern, custom_constraint"]


def test_first_kind_in_heats_order_wins_when_several_are_given() -> None:
    found, errors = parse([{"length": {"min": 1}, "range": {"max": 3}}], NUMBER)
    assert errors == []
    assert found == (Range(None, 3),)


@pytest.mark.parametrize("kind", ["range", "length"])
def test_bounds_shapes(kind: str) -> None:
    param_type = NUMBER if kind == "range" else STRING
    assert parse([{kind: 3}], param_type)[1] == [
        f"parameters.p.constraints[0].{kind}: a {kind} constraint must be a map with min "
        "and/or max"]
    assert parse([{kind: {"minimum": 3}}], param_type)[1] == [
        f"parameters.p.constraints[0].{kind}.minimum: unknown key 'minimum' in a {kind} "
        "constraint; the keys are min and max"]
    assert parse([{kind: {}}], param_type)[1] == [
        f"parameters.p.constraints[0].{kind}: a {kind} constraint needs min, max or both"]
    assert parse([{kind: {"min": "abc"}}], param_type)[1] == [
        f"parameters.p.constraints[0].{kind}.min: min must be a number, not 'abc'"]
    # Heat's get_num reads numeric strings.
    assert parse([{kind: {"max": "10"}}], param_type) == (
        ((Range(None, 10),) if kind == "range" else (Length(None, 10),)), [])


def test_length_bounds_must_be_integers() -> None:
    assert parse([{"length": {"min": 1.5}}])[1] == [
        "parameters.p.constraints[0].length.min: min must be an integer, not 1.5"]


def test_range_bounds_may_be_floats_but_not_booleans() -> None:
    assert parse([{"range": {"min": -1.5, "max": 2}}], NUMBER)[0] == (Range(-1.5, 2),)
    assert parse([{"range": {"min": True}}], NUMBER)[1] == [
        "parameters.p.constraints[0].range.min: min must be a number, not True"]


@pytest.mark.parametrize(("body", "error"), [
    ({"step": 2}, "constraints[0].modulo: a modulo constraint needs both step and offset"),
    ({"offset": 1}, "constraints[0].modulo: a modulo constraint needs both step and offset"),
    ({"step": 0, "offset": 0}, "constraints[0].modulo.step: step cannot be 0"),
    ({"step": 2, "offset": 2},
     "constraints[0].modulo.offset: offset must be smaller (by absolute value) than step"),
    ({"step": 3, "offset": -1},
     "constraints[0].modulo: step and offset must be both positive or both negative"),
    ({"step": 2.5, "offset": 1}, "constraints[0].modulo.step: step must be an integer, not 2.5"),
    ({"step": "x", "offset": 1}, "constraints[0].modulo.step: step must be a number, not 'x'"),
    ({"step": 2, "offset": 1, "base": 0},
     "constraints[0].modulo.base: unknown key 'base' in a modulo constraint; the keys are "
     "step and offset"),
])
def test_modulo_shapes(body: dict[str, Any], error: str) -> None:
    found, errors = parse([{"modulo": body}], NUMBER)
    assert found == ()
    assert errors == [f"parameters.p.{error}"]


def test_modulo_accepts_integral_floats_and_negative_pairs() -> None:
    assert parse([{"modulo": {"step": 2.0, "offset": 0}}], NUMBER)[0] == (Modulo(2, 0),)
    assert parse([{"modulo": {"step": -3, "offset": -1}}], NUMBER)[0] == (Modulo(-3, -1),)


def test_modulo_needs_ocata() -> None:
    found, errors = parse([{"modulo": {"step": 2, "offset": 1}}], NUMBER, modulo_allowed=False)
    assert found == ()
    assert errors == ["parameters.p.constraints[0].modulo: the modulo constraint needs "
                      "heat_template_version 2017-02-24 or later (this template is 2016-10-14)"]


def test_value_list_pattern_and_custom_shapes() -> None:
    assert parse([{"allowed_values": "a,b"}])[1] == [
        "parameters.p.constraints[0].allowed_values: allowed_values must be a list, not a string"]
    assert parse([{"allowed_pattern": 5}])[1] == [
        "parameters.p.constraints[0].allowed_pattern: allowed_pattern must be a string, not a "
        "number"]
    errors = parse([{"allowed_pattern": "[a-"}])[1]
    assert len(errors) == 1
    assert errors[0].startswith("parameters.p.constraints[0].allowed_pattern: '[a-' is not a "
                                "valid regular expression: ")
    assert parse([{"custom_constraint": ["nova.flavor"]}])[1] == [
        "parameters.p.constraints[0].custom_constraint: custom_constraint must be the name of "
        "a constraint, such as nova.flavor"]
    assert parse([{"length": {"min": 1}, "description": ["x"]}])[1] == [
        "parameters.p.constraints[0].description: description must be a string"]


@pytest.mark.parametrize(("entry", "param_type", "applies"), [
    ({"range": {"min": 1}}, STRING, "number"),
    ({"modulo": {"step": 2, "offset": 0}}, COMMA_DELIMITED_LIST, "number"),
    ({"length": {"min": 1}}, NUMBER, "comma_delimited_list, json, string"),
    ({"length": {"min": 1}}, BOOLEAN, "comma_delimited_list, json, string"),
    ({"allowed_pattern": "x"}, NUMBER, "string"),
    ({"allowed_pattern": "x"}, COMMA_DELIMITED_LIST, "string"),
    ({"allowed_values": [1]}, JSON, "boolean, comma_delimited_list, number, string"),
    ({"custom_constraint": "x"}, JSON, "boolean, comma_delimited_list, number, string"),
])
def test_constraint_must_apply_to_the_type(entry: dict[str, Any], param_type: str,
                                           applies: str) -> None:
    kind = next(iter(entry))
    found, errors = parse([entry], param_type)
    assert found == ()
    assert errors == [f"parameters.p.constraints[0].{kind}: a {kind} constraint does not apply "
                      f"to a {param_type} parameter (it applies to {applies})"]


def test_applicability_is_not_checked_without_a_type() -> None:
    assert parse([{"range": {"min": 1}}], None) == ((Range(1, None),), [])


def test_allowed_values_must_convert_to_the_type() -> None:
    found, errors = parse([{"allowed_values": [1, "2", "three"]}], NUMBER)
    assert errors == ["parameters.p.constraints[0].allowed_values[2]: allowed value 'three' is "
                      "not a number"]
    assert found == (AllowedValues((1, "2", "three")),)
    assert parse([{"allowed_values": ["yes", "maybe"]}], BOOLEAN)[1] == [
        "parameters.p.constraints[0].allowed_values[1]: allowed value 'maybe' is not a boolean"]


# -- checking --------------------------------------------------------------------------------


def test_length_pass_and_fail() -> None:
    c = (Length(2, 4),)
    assert messages(c, "abc", STRING) == []
    assert messages(c, "a", STRING) == ["the length is 1; it must be between 2 and 4"]
    assert messages(c, ["a", "b", "c", "d", "e"], COMMA_DELIMITED_LIST) == [
        "the length is 5; it must be between 2 and 4"]
    assert messages((Length(min=3),), {"a": 1}, JSON) == ["the length is 1; it must be at least 3"]
    assert messages((Length(max=0),), "x", STRING) == ["the length is 1; it must be at most 0"]
    assert messages((Length(max=1),), 5, JSON) == ["a number has no length"]


def test_range_pass_and_fail() -> None:
    c = (Range(1, 10),)
    assert messages(c, 1, NUMBER) == []
    assert messages(c, 10.0, NUMBER) == []
    assert messages(c, 11, NUMBER) == ["11 is out of range; it must be between 1 and 10"]
    assert messages((Range(min=0.5),), 0.25, NUMBER) == [
        "0.25 is out of range; it must be at least 0.5"]
    assert messages((Range(max=3),), 4, NUMBER, hidden=True) == [
        "the value is out of range; it must be at most 3"]


def test_modulo_pass_and_fail() -> None:
    c = (Modulo(2, 1),)
    assert messages(c, 7, NUMBER) == []
    assert messages(c, 8, NUMBER) == ["8 is not a multiple of 2 with an offset of 1"]
    # Python's modulo, as Heat's: -3 % 2 == 1.
    assert messages(c, -3, NUMBER) == []
    assert messages((Modulo(-3, -1),), -4, NUMBER) == []
    assert messages(c, 7.5, NUMBER) == ["7.5 is not a multiple of 2 with an offset of 1"]


def test_allowed_values_compare_in_the_parameter_type() -> None:
    assert messages((AllowedValues(("1", "2.5")),), 2.5, NUMBER) == []
    assert messages((AllowedValues((1, 2)),), 3, NUMBER) == [
        "3 is not an allowed value (allowed: 1, 2)"]
    assert messages((AllowedValues(("yes",)),), True, BOOLEAN) == []
    assert messages((AllowedValues((True,)),), False, BOOLEAN) == [
        "False is not an allowed value (allowed: True)"]
    # str(5) against "5": Heat converts both sides to the type.
    assert messages((AllowedValues((5,)),), "5", STRING) == []
    assert messages((AllowedValues(("m1.small", "m1.large")),), "m1.huge", STRING) == [
        "'m1.huge' is not an allowed value (allowed: 'm1.small', 'm1.large')"]


def test_allowed_values_check_every_item_of_a_list_as_is() -> None:
    c = (AllowedValues(("a", "b")),)
    assert messages(c, ["a", "b", "a"], COMMA_DELIMITED_LIST) == []
    assert messages(c, ["a", "x"], COMMA_DELIMITED_LIST) == [
        "'x' is not an allowed value (allowed: 'a', 'b')"]
    assert messages(c, ["x", "y"], COMMA_DELIMITED_LIST) == [
        "'x', 'y' are not allowed values (allowed: 'a', 'b')"]
    assert messages(c, ["x"], COMMA_DELIMITED_LIST, hidden=True) == [
        "the value has items that are not allowed (allowed: 'a', 'b')"]
    # Heat compares list items without conversion: the number 1 is not the item "1".
    assert messages((AllowedValues((1,)),), ["1"], COMMA_DELIMITED_LIST) == [
        "'1' is not an allowed value (allowed: 1)"]


def test_allowed_pattern_matches_from_start_to_end_as_heat() -> None:
    c = (AllowedPattern("[a-z]+"),)
    assert messages(c, "abc", STRING) == []
    assert messages(c, "abc1", STRING) == ["'abc1' does not match the pattern '[a-z]+'"]
    assert messages(c, "1abc", STRING) == ["'1abc' does not match the pattern '[a-z]+'"]
    # match() then end(): the first alternative matches "a" only, so "ab" fails as in Heat.
    assert messages((AllowedPattern("a|ab"),), "ab", STRING) == [
        "'ab' does not match the pattern 'a|ab'"]


def test_description_replaces_the_message() -> None:
    for constraint, value, param_type in [
        (Length(5, None, "too short"), "abc", STRING),
        (Range(None, 1, "too big"), 5, NUMBER),
        (Modulo(2, 0, "must be even"), 3, NUMBER),
        (AllowedValues(("a",), "pick a"), "b", STRING),
        (AllowedPattern("[0-9]+", "digits only"), "x", STRING),
    ]:
        assert messages((constraint,), value, param_type) == [constraint.description]


def test_hidden_values_never_appear() -> None:
    secret = "hunter2-secret"
    constraints = (Length(50, None), AllowedValues(("a",)), AllowedPattern("[0-9]+"),
                   CustomConstraint("vault.secret"))
    custom = CustomConstraintRegistry({"vault.secret": lambda v: f"secret {v!r} is unknown"})
    found = messages(constraints, secret, STRING, hidden=True, custom=custom)
    assert found == [
        "the length is 14; it must be at least 50",
        "the value is not an allowed value (allowed: 'a')",
        "the value does not match the pattern '[0-9]+'",
        "the value does not validate vault.secret",
    ]
    assert all(secret not in m for m in found)


def test_custom_constraints() -> None:
    custom = CustomConstraintRegistry({
        "nova.flavor": lambda v: None if v in ("m1.small", "m1.large") else
        f"flavor {v!r} not found",
    })
    c = (CustomConstraint("nova.flavor"),)
    assert custom.known("nova.flavor")
    assert not custom.known("glance.image")
    assert messages(c, "m1.small", STRING, custom=custom) == []
    assert messages(c, "m1.huge", STRING, custom=custom) == ["flavor 'm1.huge' not found"]
    assert messages((CustomConstraint("nova.flavor", "pick a real flavor"),), "x", STRING,
                    custom=custom) == ["pick a real flavor"]
    # Each item of a list is checked; the first failure is reported.
    assert messages(c, ["m1.small", "x", "y"], COMMA_DELIMITED_LIST, custom=custom) == [
        "flavor 'x' not found"]
    # Nobody knows glance.image: skipped, not an error.
    assert messages((CustomConstraint("glance.image"),), "x", STRING, custom=custom) == []
    assert messages(c, "m1.huge", STRING) == []  # NO_CUSTOM_CONSTRAINTS by default
    assert messages(c, "m1.huge", STRING, custom=custom, skip_custom=True) == []


def test_hidden_custom_message_kept_when_it_does_not_leak() -> None:
    custom = CustomConstraintRegistry({"svc.up": lambda v: "the service is unreachable"})
    assert messages((CustomConstraint("svc.up"),), "s3cret", STRING, hidden=True,
                    custom=custom) == ["the service is unreachable"]


def test_no_custom_constraints_knows_nothing() -> None:
    assert not NO_CUSTOM_CONSTRAINTS.known("nova.flavor")
    assert NO_CUSTOM_CONSTRAINTS.check("nova.flavor", "x") is None


def test_violations_name_index_and_kind_and_all_are_reported() -> None:
    found = check_value((Length(5, None), AllowedPattern("[0-9]+")), "ab", STRING)
    assert [(v.index, v.kind) for v in found] == [(0, "length"), (1, "allowed_pattern")]


def test_constraints_not_applying_to_the_type_are_ignored_when_checking() -> None:
    assert messages((Range(1, 2),), "zzz", STRING) == []


def test_unconvertible_value_is_reported_not_raised() -> None:
    assert messages((Range(1, 2),), "abc", NUMBER) == [
        "'abc' cannot be checked against a range constraint"]


# -- conversions -----------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "number"), [
    (5, 5), (2.5, 2.5), ("7", 7), (" 8 ", 8), ("1.5", 1.5), ("1e3", 1000.0), ("-2", -2),
])
def test_str_to_num(raw: Any, number: float) -> None:
    result = str_to_num(raw)
    assert result == number
    assert type(result) is type(number)


@pytest.mark.parametrize("raw", ["abc", "", True, None, [1], {"a": 1}, "0x10"])
def test_str_to_num_refuses(raw: Any) -> None:
    with pytest.raises(ValueError):
        str_to_num(raw)


@pytest.mark.parametrize("word", ["1", "t", "true", "on", "y", "yes", "TRUE", " Yes ", 1, True])
def test_bool_from_string_true(word: Any) -> None:
    assert bool_from_string(word) is True


@pytest.mark.parametrize("word", ["0", "f", "false", "off", "n", "no", "False", 0, False])
def test_bool_from_string_false(word: Any) -> None:
    assert bool_from_string(word) is False


@pytest.mark.parametrize("word", ["maybe", "", 2, 1.0, None, "truee"])
def test_bool_from_string_refuses(word: Any) -> None:
    with pytest.raises(ValueError, match="not a boolean; use one of 0, 1, f, false, n, no, off, "
                                         "on, t, true, y, yes"):
        bool_from_string(word)
