"""The collection functions: repeat, map_merge, map_replace, list_concat, filter, contains and
the CFN Fn::Select and Fn::MemberListToMap, as Heat has them."""

from __future__ import annotations

import pytest

from convergence.template.functions.base import ELIDED, FunctionDef
from convergence.template.functions.collections import (
    CONTAINS,
    FILTER,
    FN_MEMBER_LIST_TO_MAP,
    FN_SELECT,
    LIST_CONCAT,
    LIST_CONCAT_UNIQUE,
    MAP_MERGE,
    MAP_REPLACE,
)
from convergence.template.functions.repeat import REPEAT, REPEAT_PERMUTATIONS, REPEAT_WITH_MAP

from .fn_helpers import call, check, dyn, eval_error, evaluate

ELIDE = FunctionDef("if", lambda c, r: ELIDED)
ALL_REPEATS = [REPEAT, REPEAT_WITH_MAP, REPEAT_PERMUTATIONS]


# --- repeat ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ALL_REPEATS)
def test_repeat_strings_lists_and_maps(fn: FunctionDef) -> None:
    loop = {"%var%": ["a", "b"]}
    assert evaluate(fn, {"template": "this is %var%", "for_each": loop}) == [
        "this is a", "this is b"
    ]
    assert evaluate(fn, {"template": {"key-%var%": ["v-%var%", 1, None]}, "for_each": loop}) == [
        {"key-a": ["v-a", 1, None]}, {"key-b": ["v-b", 1, None]}
    ]
    assert evaluate(fn, {"template": 7, "for_each": {"x": dyn([1, 2])}}) == [7, 7]
    assert evaluate(fn, {"template": "%v%", "for_each": {"%v%": None}}) == []


@pytest.mark.parametrize("fn", ALL_REPEATS)
def test_repeat_several_lists_make_the_cartesian_product(fn: FunctionDef) -> None:
    args = {"template": "%a%-%b%", "for_each": {"%a%": ["x", "y"], "%b%": dyn(["1", "2"])}}
    assert evaluate(fn, args) == ["x-1", "x-2", "y-1", "y-2"]


def test_repeat_replaces_sequentially_like_heat() -> None:
    # A later placeholder is also replaced inside the value put in for an earlier one.
    args = {"template": "%a%", "for_each": {"%a%": ["<%b%>"], "%b%": ["z"]}}
    assert evaluate(REPEAT, args) == ["<z>"]


def test_repeat_over_map_keys_from_newton() -> None:
    args = {"template": "%k%", "for_each": {"%k%": {"x": 1, "y": 2}}}
    assert evaluate(REPEAT_WITH_MAP, args) == ["x", "y"]
    assert evaluate(REPEAT_PERMUTATIONS, args) == ["x", "y"]
    assert check(REPEAT, args) == ['repeat: the values of the "for_each" argument must be lists']
    assert eval_error(REPEAT, {**args, "for_each": {"%k%": dyn({"x": 1})}}) == (
        'repeat: the values of the "for_each" argument must be lists'
    )


def test_repeat_without_permutations_zips_equal_lists() -> None:
    args = {
        "template": {"net": "%n%", "port": "%p%"},
        "for_each": {"%n%": ["n1", "n2"], "%p%": ["p1", "p2"]},
        "permutations": False,
    }
    assert evaluate(REPEAT_PERMUTATIONS, args) == [
        {"net": "n1", "port": "p1"}, {"net": "n2", "port": "p2"}
    ]
    # A null list counts as empty and is left out of the length check.
    assert evaluate(REPEAT_PERMUTATIONS, {**args, "for_each": {"%n%": None, "%p%": ["p"]}}) == []
    # Before pike the key means nothing.
    assert evaluate(REPEAT_WITH_MAP, args) == [
        {"net": n, "port": p} for n in ("n1", "n2") for p in ("p1", "p2")
    ]


def test_repeat_without_permutations_errors() -> None:
    uneven = {"template": "x", "for_each": {"a": ["1"], "b": ["1", "2"]}, "permutations": False}
    message = "repeat: the for_each lists must have equal lengths when permutations is false"
    assert check(REPEAT_PERMUTATIONS, uneven) == [message]
    assert eval_error(REPEAT_PERMUTATIONS, {**uneven, "for_each": dyn(uneven["for_each"])}) == (
        message
    )
    maps = {**uneven, "for_each": {"a": {"k": "v"}}}
    lists_only = 'repeat: the values of the "for_each" argument must be lists'
    assert check(REPEAT_PERMUTATIONS, maps) == [lists_only]
    assert eval_error(REPEAT_PERMUTATIONS, {**maps, "for_each": {"a": dyn({"k": 1})}}) == lists_only
    assert check(REPEAT_PERMUTATIONS, {**uneven, "permutations": "no"}) == [
        'repeat: "permutations" must be a boolean'
    ]
    assert check(REPEAT_PERMUTATIONS, {**uneven, "permutations": dyn(False)}) == [
        'repeat: "permutations" must be a boolean'
    ]


@pytest.mark.parametrize("fn", ALL_REPEATS)
def test_repeat_shape_errors(fn: FunctionDef) -> None:
    shape = 'repeat: arguments must be a map with "for_each" and "template"'
    assert check(fn, {"template": "x"}) == [shape]
    assert check(fn, {"templte": "x", "for_each": {"a": ["b"]}}) == [shape]
    assert check(fn, ["x"]) == [shape]
    assert check(fn, dyn({"template": "x", "for_each": {}})) == [shape]
    assert check(fn, {"template": "x", "for_each": "%var%"}) == [
        'repeat: the "for_each" argument must contain a map'
    ]
    assert check(fn, {"template": "x", "for_each": {}}) == [
        'repeat: the "for_each" argument must not be empty'
    ]
    assert check(fn, {"template": "x", "for_each": {"a": "bc"}})[0].startswith(
        'repeat: the values of the "for_each" argument must be lists'
    )
    assert check(fn, {"template": "x", "for_each": dyn("x")}) == []
    assert check(fn, {"template": "x", "for_each": {"a": dyn("x"), "b": None}}) == []


def test_repeat_evaluation_errors() -> None:
    assert eval_error(REPEAT, {"template": "x", "for_each": dyn(["a"])}) == (
        'repeat: the "for_each" argument must contain a map'
    )
    assert eval_error(REPEAT, {"template": "x", "for_each": dyn({})}) == (
        'repeat: the "for_each" argument must not be empty'
    )
    # Heat substitutes with str.replace, which refuses non-string values.
    assert eval_error(REPEAT, {"template": "port-%i%", "for_each": {"%i%": [1, 2]}}) == (
        "repeat: cannot substitute 1 for '%i%': placeholders and their values must be strings"
    )


# --- map_merge / map_replace -------------------------------------------------------------------


def test_map_merge() -> None:
    assert evaluate(MAP_MERGE, [{"a": 1, "b": 2}, None, dyn({"a": 3})]) == {"a": 3, "b": 2}
    assert evaluate(MAP_MERGE, []) == {}
    assert evaluate(MAP_MERGE, "") == {}  # Heat iterates the empty string: nothing to merge
    assert evaluate(MAP_MERGE, [{"a": 1}, call(ELIDE, None)]) == {"a": 1}
    assert check(MAP_MERGE, [{"a": 1}, dyn(["x"])]) == []


def test_map_merge_errors() -> None:
    assert check(MAP_MERGE, {"a": 1}) == ["map_merge: arguments must be a list of maps"]
    assert check(MAP_MERGE, [{"a": 1}, ["f1", "b2"]]) == ["map_merge: items to merge must be maps"]
    assert eval_error(MAP_MERGE, dyn(3)) == "map_merge: arguments must be a list of maps"
    assert eval_error(MAP_MERGE, [dyn("x")]) == "map_merge: items to merge must be maps"
    assert eval_error(MAP_MERGE, "ab") == "map_merge: items to merge must be maps"


def test_map_replace() -> None:
    source = {"f1": "b1", "f2": "b2"}
    rules = {"keys": {"f1": "F1"}, "values": {"b2": "B2"}}
    assert evaluate(MAP_REPLACE, [source, rules]) == {"F1": "b1", "f2": "B2"}
    assert evaluate(MAP_REPLACE, [source, {"keys": {"f2": "f2"}}]) == source
    assert evaluate(MAP_REPLACE, [source, {"keys": None, "values": None}]) == source
    assert evaluate(MAP_REPLACE, [source, {"keys": {"f1": None}}]) == source
    assert evaluate(MAP_REPLACE, [{"f1": [], "f2": "b"}, {"values": {"b": "c"}}]) == {
        "f1": [], "f2": "c"
    }
    assert evaluate(MAP_REPLACE, dyn([None, {}])) == {}


def test_map_replace_collisions() -> None:
    source = {"f1": "b1", "f2": "b2"}
    assert eval_error(MAP_REPLACE, [source, {"keys": {"f2": "f1"}}]) == (
        "map_replace: key replacement f1 collides with a key in the input map"
    )
    assert eval_error(MAP_REPLACE, [source, {"keys": {"f1": "f3", "f2": "f3"}}]) == (
        "map_replace: key replacement f3 collides with a key in the output map"
    )
    assert eval_error(MAP_REPLACE, [source, {"keys": {"f1": ["x"]}}]) == (
        "map_replace: key replacement ['x'] cannot be a map key"
    )


def test_map_replace_shape_errors() -> None:
    shape = 'map_replace: arguments must be [map, {"keys": map, "values": map}]'
    for bad in ("ab", [], [{"f1": "b1"}], [{"a": 1}, "ab"], [{"a": 1}, {"notkeys": {}}],
                [{"a": 1}, {"keys": ["x"]}], [{}, {}, {}]):
        assert check(MAP_REPLACE, bad) == [shape], bad
    assert check(MAP_REPLACE, [dyn({}), {"keys": dyn({}), "values": {"a": "b"}}]) == []
    assert check(MAP_REPLACE, dyn("ab")) == []
    for bad in (dyn("ab"), [{"a": 1}, dyn("ab")], [{"a": 1}, {"notkeys": {}}],
                [{"a": 1}, {"values": dyn([1])}]):
        assert eval_error(MAP_REPLACE, bad) == shape


# --- list_concat / list_concat_unique -----------------------------------------------------------


def test_list_concat() -> None:
    result = evaluate(LIST_CONCAT, [["v1", "v2"], ["v2"], None, dyn(["v3"])])
    assert result == ["v1", "v2", "v2", "v3"]
    assert evaluate(LIST_CONCAT, [[{"a": 1}], [{"a": 1}]]) == [{"a": 1}, {"a": 1}]
    assert evaluate(LIST_CONCAT, []) == []


def test_list_concat_unique_keeps_first_occurrences() -> None:
    assert evaluate(LIST_CONCAT_UNIQUE, [["v1", "v2"], ["v1", "v3"]]) == ["v1", "v2", "v3"]
    assert evaluate(LIST_CONCAT_UNIQUE, [[{"a": 1}], [{"a": 1}, [2]], [[2]]]) == [{"a": 1}, [2]]


@pytest.mark.parametrize("fn", [LIST_CONCAT, LIST_CONCAT_UNIQUE])
def test_list_concat_errors(fn: FunctionDef) -> None:
    name = fn.name
    assert check(fn, "I am a string") == [f"{name}: arguments must be a list of lists"]
    assert check(fn, ["v1", "v2"]) == [f"{name}: items to concat must be lists"]
    assert check(fn, [{"k": "v"}, ["v3"]]) == [f"{name}: items to concat must be lists"]
    assert check(fn, dyn("x")) == []
    assert eval_error(fn, dyn({"k": 1})) == f"{name}: arguments must be a list of lists"
    assert eval_error(fn, [dyn("ab")]) == f"{name}: items to concat must be lists"


# --- filter / contains -----------------------------------------------------------------------


def test_filter() -> None:
    assert evaluate(FILTER, [[None], [1, None, 4, 2, None]]) == [1, 4, 2]
    assert evaluate(FILTER, [["a", "b"], dyn(["a", "c", "b"])]) == ["c"]
    assert evaluate(FILTER, [None, ["a"]]) == ["a"]
    # An empty sequence of any type comes back as it is, without a look at the values.
    assert evaluate(FILTER, ["not a list", []]) == []
    assert evaluate(FILTER, [["x"], None]) is None


def test_filter_errors() -> None:
    shape = "filter: arguments must be [values, list]"
    assert check(FILTER, "foo") == [shape]
    assert check(FILTER, [[None], [1, 2], "foo"]) == [shape]
    assert check(FILTER, dyn([[], []])) == [shape]
    assert check(FILTER, [[None], {"a": 1}]) == ["filter: only works with lists"]
    assert check(FILTER, ["abcd", ["a", "b"]]) == ["filter: the values to remove must be a list"]
    assert check(FILTER, [dyn("a"), dyn("b")]) == []
    assert eval_error(FILTER, [["a"], dyn("abcd")]) == "filter: only works with lists"
    assert eval_error(FILTER, [dyn("abcd"), ["a"]]) == "filter: the values to remove must be a list"


def test_contains() -> None:
    assert evaluate(CONTAINS, ["v1", ["v1", "v2"]]) is True
    assert evaluate(CONTAINS, ["v3", dyn(["v1", "v2"])]) is False
    assert evaluate(CONTAINS, ["a", "abc"]) is True  # a string is a sequence: substring test
    assert evaluate(CONTAINS, [{"a": 1}, [{"a": 1}]]) is True


def test_contains_errors() -> None:
    shape = "contains: arguments must be [value, sequence]"
    assert check(CONTAINS, []) == [shape]
    assert check(CONTAINS, ["a"]) == [shape]
    assert check(CONTAINS, "a") == [shape]
    assert check(CONTAINS, ["a", {"a": 1}]) == ["contains: the second argument must be a sequence"]
    assert check(CONTAINS, ["a", dyn({})]) == []
    assert eval_error(CONTAINS, ["a", dyn(None)]) == (
        "contains: the second argument must be a sequence"
    )
    assert eval_error(CONTAINS, [1, "abc"]) == (
        "contains: only a string can be looked for in a string"
    )


# --- Fn::Select --------------------------------------------------------------------------------


def test_select_from_lists_and_maps() -> None:
    assert evaluate(FN_SELECT, [1, ["a", "b"]]) == "b"
    assert evaluate(FN_SELECT, ["0", ["a", "b"]]) == "a"
    assert evaluate(FN_SELECT, [-1, ["a", "b"]]) == "b"
    assert evaluate(FN_SELECT, ["k", {"k": "v"}]) == "v"
    assert evaluate(FN_SELECT, ["1", '["x", "y"]']) == "y"  # serialized JSON is parsed
    assert evaluate(FN_SELECT, ["k", dyn('{"k": 3}')]) == 3


def test_select_out_of_range_gives_empty_string() -> None:
    assert evaluate(FN_SELECT, [5, ["a"]]) == ""
    assert evaluate(FN_SELECT, ["missing", {"k": "v"}]) == ""
    assert evaluate(FN_SELECT, [0, ""]) == ""
    assert evaluate(FN_SELECT, [0, None]) == ""


def test_select_errors() -> None:
    shape = "Fn::Select: arguments must be [index, collection]"
    assert check(FN_SELECT, [1]) == [shape]
    assert check(FN_SELECT, "1") == [shape]
    assert check(FN_SELECT, [1, {"k": "v"}]) == ["Fn::Select: the index must be a string"]
    assert check(FN_SELECT, ["x", ["a"]]) == ["Fn::Select: the index must be an integer"]
    assert check(FN_SELECT, [dyn("x"), ["a"]]) == []
    assert eval_error(FN_SELECT, [0, dyn({"k": 1})]) == "Fn::Select: the index must be a string"
    assert eval_error(FN_SELECT, ["x", dyn(["a"])]) == "Fn::Select: the index must be an integer"
    assert eval_error(FN_SELECT, [0, "not json"]).startswith("Fn::Select: Expecting value")
    assert eval_error(FN_SELECT, [0, dyn(5)]) == "Fn::Select: the arguments are not fully resolved"


# --- Fn::MemberListToMap -------------------------------------------------------------------------


def test_member_list_to_map() -> None:
    members = [
        ".member.2.Name=second", ".member.2.Value=2",
        ".member.0.Name=key", ".member.0.Value=door=open",
        ".member.1.Name=alone", "unrelated=1",
    ]
    assert evaluate(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", members]) == {
        "key": "door=open", "second": "2"
    }
    assert evaluate(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", dyn([])]) == {}


def test_member_list_to_map_errors() -> None:
    shape = (
        "Fn::MemberListToMap: arguments must be "
        "[key name, value name, ['.member.0.<key name>=<key>', ...]]"
    )
    assert check(FN_MEMBER_LIST_TO_MAP, ["Name", "Value"]) == [shape]
    assert check(FN_MEMBER_LIST_TO_MAP, [dyn("Name"), "Value", []]) == [
        "Fn::MemberListToMap: the key name must be a string"
    ]
    assert check(FN_MEMBER_LIST_TO_MAP, ["Name", 1, []]) == [
        "Fn::MemberListToMap: the value name must be a string"
    ]
    assert check(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", [1]]) == [
        "Fn::MemberListToMap: member list items must be strings"
    ]
    assert check(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", 5]) == [
        "Fn::MemberListToMap: the member list must be a list"
    ]
    assert eval_error(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", dyn(5)]) == (
        "Fn::MemberListToMap: the member list must be a list"
    )
    assert eval_error(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", [dyn(1)]]) == (
        "Fn::MemberListToMap: member list items must be strings"
    )
    assert eval_error(FN_MEMBER_LIST_TO_MAP, ["Name", "Value", ["no-equals"]]) == (
        "Fn::MemberListToMap: member list item 'no-equals' has no '='"
    )
