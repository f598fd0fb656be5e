"""The string functions: join, replace, split, digest, base64 and make_url, as Heat has them."""

from __future__ import annotations

import hashlib

import pytest

from convergence.template.functions.base import ELIDED, FunctionDef
from convergence.template.functions.replace import (
    FN_REPLACE,
    STR_REPLACE,
    STR_REPLACE_JSON,
    STR_REPLACE_STRICT,
    STR_REPLACE_VSTRICT,
)
from convergence.template.functions.strings import (
    DIGEST,
    FN_BASE64,
    FN_JOIN,
    FN_SPLIT,
    LIST_JOIN,
    LIST_JOIN_MULTI,
    MAKE_URL,
    STR_SPLIT,
)

from .fn_helpers import Ctx, Res, call, check, dyn, eval_error, evaluate

ELIDE = FunctionDef("if", lambda c, r: ELIDED)


# --- list_join -------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [LIST_JOIN, FN_JOIN])
def test_join_single_list(fn: FunctionDef) -> None:
    assert evaluate(fn, [", ", ["a", "b", None, "c"]]) == "a, b, , c"
    assert evaluate(fn, ["-", dyn(["x", "y"])]) == "x-y"
    assert evaluate(fn, [dyn(":"), None]) == ""
    assert check(fn, [",", ["a", dyn("b")]]) == []


@pytest.mark.parametrize("fn", [LIST_JOIN, FN_JOIN])
def test_join_single_list_errors(fn: FunctionDef) -> None:
    name = fn.name
    shape = f"{name}: arguments must be [delimiter, [string, ...]]"
    assert check(fn, [","]) == [shape]
    assert check(fn, [",", ["a"], ["b"]]) == [shape]
    assert check(fn, dyn([",", ["a"]])) == [shape]  # Heat wants a literal list
    assert check(fn, [1, ["a"]]) == [f"{name}: the delimiter must be a string"]
    assert check(fn, [",", "ab"]) == [f"{name}: must operate on a list"]
    assert check(fn, [",", ["a", 1]]) == [f"{name}: items to join must be strings, not 1"]
    assert eval_error(fn, [",", "ab"]) == f"{name}: must operate on a list"
    assert eval_error(fn, [dyn(1), ["a"]]) == f"{name}: the delimiter must be a string"
    # Before 2015-10-15 lists and maps cannot be joined.
    assert eval_error(fn, [",", [["a"]]]) == f"{name}: items to join must be strings, not ['a']"


def test_list_join_multiple_lists() -> None:
    assert evaluate(LIST_JOIN_MULTI, [",", ["a", "b"], ["c"], dyn(["d"])]) == "a,b,c,d"
    # Empty values of any type are skipped, null items become "".
    assert evaluate(LIST_JOIN_MULTI, [",", [], None, "", {}, ["a", None]]) == "a,"
    # Maps and lists are JSON with sorted keys, as jsonutils.dumps(sort_keys=True).
    joined = evaluate(LIST_JOIN_MULTI, [" ", [{"b": 1, "a": [1, 2]}, ["x"]]])
    assert joined == '{"a": [1, 2], "b": 1} ["x"]'
    # A list elided by a wallaby if disappears.
    assert evaluate(LIST_JOIN_MULTI, [",", ["a"], call(ELIDE, None)]) == "a"


def test_list_join_multiple_lists_errors() -> None:
    shape = "list_join: arguments must be [delimiter, [string, ...], ...]"
    assert check(LIST_JOIN_MULTI, [","]) == [shape]
    assert check(LIST_JOIN_MULTI, ",") == [shape]
    assert check(LIST_JOIN_MULTI, [None, ["a"]]) == ["list_join: the delimiter must be a string"]
    assert check(LIST_JOIN_MULTI, [",", "abc"]) == ["list_join: must operate on a list"]
    assert check(LIST_JOIN_MULTI, [",", [3]]) == [
        "list_join: items to join must be strings, maps or lists, not 3"
    ]
    assert check(LIST_JOIN_MULTI, [",", [dyn(3), [dyn(1)]], dyn(5)]) == []
    assert eval_error(LIST_JOIN_MULTI, [",", {"a": 1}]) == "list_join: must operate on a list"
    assert eval_error(LIST_JOIN_MULTI, [",", [True]]) == (
        "list_join: items to join must be strings, maps or lists, not True"
    )
    assert eval_error(LIST_JOIN_MULTI, [dyn(2), []]) == "list_join: the delimiter must be a string"


# --- str_replace -----------------------------------------------------------------------------


def replace_args(template: object, params: object) -> dict[str, object]:
    return {"template": template, "params": params}


def test_str_replace_basic() -> None:
    args = replace_args("http://$host:$port/", {"$host": "h", "$port": 80})
    assert evaluate(STR_REPLACE, args) == "http://h:80/"
    assert evaluate(STR_REPLACE, replace_args("a-b", {"a": None, "b": True})) == "-True"
    assert evaluate(STR_REPLACE, replace_args("v=x", {"x": 1.5})) == "v=1.5"
    assert evaluate(STR_REPLACE, replace_args(dyn("<%a%>"), dyn({"<%a%>": "z"}))) == "z"


def test_str_replace_prefers_longer_keys_and_never_rescans_values() -> None:
    params = {"$var": "A", "$var1": "B", "B": "never"}
    assert evaluate(STR_REPLACE, replace_args("$var1 $var", params)) == "B A"
    # Equal lengths: the lexicographically smaller key is replaced first.
    assert evaluate(STR_REPLACE, replace_args("abc", {"ab": "1", "bc": "2"})) == "1c"
    # A value is not searched for other keys.
    assert evaluate(STR_REPLACE, replace_args("x", {"x": "y", "y": "z"})) == "y"


def test_str_replace_heat_ordering_cases() -> None:
    # The cases of Heat's own test_hot.py.
    params = {"1": "a", "12": "b", "123": "c", "1234": "d", "12345": "e", "123456": "f",
              "1234567": "g"}
    assert evaluate(STR_REPLACE, replace_args("1234567890", params)) == "g890"
    params = {"1": "a", "4": "d", "8": "h", "9": "i", "123": "1", "456": "4", "890": "8",
              "90": "9"}
    assert evaluate(STR_REPLACE, replace_args("1234567890", params)) == "1478"
    params = {"987654": "a", "876543": "b", "765432": "c", "654321": "d", "543210": "e"}
    assert evaluate(STR_REPLACE, replace_args("9876543210", params)) == "9876e"
    params = {"var1": "foo", "var2": "bar", "var3": "zed", "var": "tricky "}
    template = "Template var1 var1 s var2 t varvarvar3"
    assert evaluate(STR_REPLACE_STRICT, replace_args(template, params)) == (
        "Template foo foo s bar t tricky tricky zed"
    )


def test_str_replace_before_2015_10_refuses_lists() -> None:
    args = replace_args("a", {"a": ["x"]})
    message = "str_replace: params must be strings or numbers, param a is not valid"
    assert check(STR_REPLACE, args) == [message]
    assert check(STR_REPLACE, replace_args("a", {"a": [dyn("x")]})) == [message]
    assert eval_error(STR_REPLACE, replace_args("a", {"a": dyn({"k": 1})})) == message


def test_str_replace_json_serializes_lists_and_maps() -> None:
    params = {"L": [1, "a"], "M": {"z": None, "a": True}, "N": 3}
    result = evaluate(STR_REPLACE_JSON, replace_args("L M N", params))
    assert result == '[1, "a"] {"a": true, "z": null} 3'
    assert evaluate(STR_REPLACE_JSON, replace_args("[x]", {"x": []})) == "[[]]"


def test_str_replace_shape_errors() -> None:
    shape = 'str_replace: arguments must be a map with "template" and "params"'
    assert check(STR_REPLACE_JSON, ["a", {}]) == [shape]
    assert check(STR_REPLACE_JSON, {"template": "a"}) == [shape]
    assert check(STR_REPLACE_JSON, dyn({"template": "a", "params": {}})) == [shape]
    assert check(STR_REPLACE_JSON, replace_args("a", ["x"])) == [
        "str_replace: params must be a map"
    ]
    assert check(STR_REPLACE_JSON, replace_args(5, {})) == [
        "str_replace: the template must be a string"
    ]
    assert check(STR_REPLACE_JSON, replace_args("a", {1: "x"})) == [
        "str_replace: param placeholders must be strings"
    ]
    assert check(STR_REPLACE_JSON, replace_args(dyn("a"), {"": "x"})) == [
        "str_replace: param placeholders must not be empty"
    ]
    assert check(STR_REPLACE_JSON, replace_args(dyn("a"), dyn({}))) == []


def test_str_replace_evaluation_errors() -> None:
    assert eval_error(STR_REPLACE_JSON, replace_args(dyn(5), {})) == (
        "str_replace: the template must be a string"
    )
    assert eval_error(STR_REPLACE_JSON, replace_args("a", dyn("x"))) == (
        "str_replace: params must be a map"
    )
    assert eval_error(STR_REPLACE_JSON, replace_args("a", dyn({2: "x"}))) == (
        "str_replace: param placeholders must be strings"
    )
    assert eval_error(STR_REPLACE_JSON, replace_args("a", {"a": dyn(object())})) == (
        "str_replace: params must be strings, numbers, lists or maps"
    )
    assert eval_error(STR_REPLACE_JSON, replace_args("a", dyn({"": "x"}))) == (
        "str_replace: param placeholders must not be empty"
    )


def test_str_replace_strict() -> None:
    assert evaluate(STR_REPLACE_STRICT, replace_args("a b", {"a": "1", "b": ""})) == "1 "
    args = replace_args("foobar", {"foobar": "x", "foo": "y", "zz": "q"})
    message = "str_replace_strict: the following params were not found in the template: foo,zz"
    assert check(STR_REPLACE_STRICT, args) == [message]  # a literal template is checked early
    assert eval_error(STR_REPLACE_STRICT, {**args, "template": dyn("foobar")}) == message
    assert check(STR_REPLACE_STRICT, replace_args(dyn("x"), {"foo": "y"})) == []
    # A param given by a call may vanish (wallaby if), so only evaluation can tell.
    assert check(STR_REPLACE_STRICT, replace_args("x", {"x": "1", "y": dyn("2")})) == []
    assert eval_error(STR_REPLACE_STRICT, replace_args("x", {"x": "1", "y": dyn("2")})) == (
        "str_replace_strict: the following params were not found in the template: y"
    )
    message = ("str_replace_vstrict: the following params were not found in the template: "
               "longvarname,var0,var")
    params = {"var1": "foo", "var2": "bar", "var0": "zed", "var": "z", "longvarname": "q"}
    assert check(STR_REPLACE_VSTRICT, replace_args("Template var1 string var2", params)) == [
        message
    ]


def test_str_replace_vstrict_refuses_empty_values() -> None:
    assert evaluate(STR_REPLACE_VSTRICT, replace_args("a", {"a": 0})) == "0"
    for empty in ("", None, [], {}):
        args = replace_args("a", {"a": dyn(empty)})
        assert eval_error(STR_REPLACE_VSTRICT, args) == (
            "str_replace_vstrict: param a has an undefined or empty value; "
            "it must be a defined non-empty value"
        )
    assert check(STR_REPLACE_VSTRICT, replace_args("a", {"a": ""})) != []
    assert check(STR_REPLACE_VSTRICT, replace_args("a", {"a": [dyn("")]})) == []


def test_fn_replace() -> None:
    assert evaluate(FN_REPLACE, [{"$a": "1", "%b%": 2}, "$a is %b%"]) == "1 is 2"
    shape = "Fn::Replace: arguments must be [{params}, template]"
    assert check(FN_REPLACE, {"template": "a", "params": {}}) == [shape]
    assert check(FN_REPLACE, [{}]) == [shape]
    assert eval_error(FN_REPLACE, [{"a": {"x": 1}}, "a"]) == (
        "Fn::Replace: params must be strings or numbers, param a is not valid"
    )


# --- str_split -------------------------------------------------------------------------------


def test_str_split() -> None:
    assert evaluate(STR_SPLIT, [",", "a,b,c"]) == ["a", "b", "c"]
    assert evaluate(STR_SPLIT, [",", "a,b,c", 1]) == "b"
    assert evaluate(STR_SPLIT, [",", "a,b,c", "2"]) == "c"
    assert evaluate(STR_SPLIT, [",", "a,b,c", -1]) == "c"  # Python indexing, as Heat
    assert evaluate(STR_SPLIT, [",", "a,b", 1.9]) == "b"  # int() truncates
    assert evaluate(STR_SPLIT, [",", None]) is None
    assert evaluate(STR_SPLIT, [None, "a  b"]) == ["a", "b"]  # str.split(None)
    assert evaluate(STR_SPLIT, dyn([":", "x:y"])) == ["x", "y"]
    assert evaluate(STR_SPLIT, [",", "a", 0, "ignored"]) == "a"


def test_str_split_errors() -> None:
    shape = "str_split: arguments must be [delimiter, string] or [delimiter, string, index]"
    assert check(STR_SPLIT, "a,b") == [shape]
    assert check(STR_SPLIT, {"a": 1}) == [shape]
    assert check(STR_SPLIT, [","]) == [shape]
    assert check(STR_SPLIT, dyn([","])) == []
    assert check(STR_SPLIT, [1, "a"]) == ["str_split: the delimiter must be a string"]
    assert check(STR_SPLIT, ["", "a"]) == ["str_split: the delimiter must not be empty"]
    assert check(STR_SPLIT, [",", 5]) == ["str_split: the value to split must be a string"]
    assert check(STR_SPLIT, [",", "a", "x"]) == ["str_split: the index must be an integer, not 'x'"]
    assert eval_error(STR_SPLIT, dyn([","])) == shape
    assert eval_error(STR_SPLIT, [",", dyn(["a"])]) == (
        "str_split: the value to split must be a string"
    )
    assert eval_error(STR_SPLIT, [",", "a,b", 2]) == "str_split: the index must be between 0 and 1"
    assert eval_error(STR_SPLIT, [",", "a", None]) == (
        "str_split: the index must be an integer, not None"
    )


def test_fn_split() -> None:
    assert evaluate(FN_SPLIT, [",", dyn("a,b")]) == ["a", "b"]
    assert check(FN_SPLIT, [",", "x"]) == []
    assert check(FN_SPLIT, [",", "x", 1]) == ["Fn::Split: arguments must be [delimiter, string]"]
    assert check(FN_SPLIT, [dyn(","), "x"]) == ["Fn::Split: the delimiter must be a string"]
    assert check(FN_SPLIT, [",", 5]) == ["Fn::Split: the value to split must be a string"]
    assert eval_error(FN_SPLIT, [",", dyn(None)]) == (
        "Fn::Split: the value to split must be a string, not NoneType"
    )


# --- digest / Fn::Base64 -----------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"])
def test_digest(algorithm: str) -> None:
    expected = hashlib.new(algorithm, b"hello").hexdigest()
    assert evaluate(DIGEST, [algorithm, "hello"]) == expected
    assert evaluate(DIGEST, [algorithm.upper(), dyn("hello")]) == expected


def test_digest_hashes_latin1_like_heat() -> None:
    assert evaluate(DIGEST, ["md5", "caf\xe9"]) == hashlib.md5(b"caf\xe9").hexdigest()
    assert eval_error(DIGEST, ["md5", "\u20ac"]) == (
        "digest: the value must contain only Latin-1 characters"
    )


def test_digest_errors() -> None:
    assert check(DIGEST, ["md5"]) == ["digest: arguments must be [algorithm, value]"]
    assert check(DIGEST, "md5") == ["digest: arguments must be [algorithm, value]"]
    assert check(DIGEST, ["md5", 5]) == ["digest: arguments must be a list of strings"]
    assert check(DIGEST, ["rot13", "x"])[0].startswith("digest: algorithm must be one of ")
    assert check(DIGEST, dyn(["rot13", "x"])) == []
    assert eval_error(DIGEST, ["md5", dyn(5)]) == "digest: arguments must be a list of strings"
    assert eval_error(DIGEST, dyn(["md5"])) == "digest: arguments must be [algorithm, value]"
    assert "sha256" in eval_error(DIGEST, [dyn("crc"), "x"])


def test_base64_returns_the_string_unchanged() -> None:
    assert evaluate(FN_BASE64, "#!/bin/sh") == "#!/bin/sh"
    assert check(FN_BASE64, ["x"]) == ["Fn::Base64: the argument must be a string"]
    assert eval_error(FN_BASE64, dyn(3)) == "Fn::Base64: the argument must be a string"


# --- make_url --------------------------------------------------------------------------------


def test_make_url_full() -> None:
    args = {
        "scheme": "https", "username": "us er", "password": "p@ss", "host": "example.com",
        "port": 8443, "path": "/a b/c", "query": {"q": "x/y z", "n": 1}, "fragment": "frag ment",
    }
    assert evaluate(MAKE_URL, args) == (
        "https://us%20er:p%40ss@example.com:8443/a%20b/c?q=x/y+z&n=1#frag%20ment"
    )


def test_make_url_hosts_and_minimal_forms() -> None:
    assert evaluate(MAKE_URL, {"scheme": "http", "host": "::1", "port": "80"}) == "http://[::1]:80"
    assert evaluate(MAKE_URL, {"scheme": "http", "host": "[fe80::1]"}) == "http://[fe80::1]"
    assert evaluate(MAKE_URL, {"scheme": "http", "host": "h", "path": "p"}) == "http://h/p"
    assert evaluate(MAKE_URL, {"scheme": "http", "host": "h", "username": "u"}) == "http://u@h"
    assert evaluate(MAKE_URL, {"path": "/x", "query": {}}) == "/x"
    assert evaluate(MAKE_URL, {"scheme": "file", "path": "/etc/hosts"}) == "file:///etc/hosts"


def test_make_url_errors() -> None:
    assert check(MAKE_URL, ["http"]) == ["make_url: arguments must be a map"]
    assert check(MAKE_URL, dyn({})) == ["make_url: arguments must be a map"]
    assert check(MAKE_URL, {"host": "h", "bogus": 1, "other": 2}) == [
        "make_url: invalid arguments: bogus, other"
    ]
    assert check(MAKE_URL, {"host": 5}) == ['make_url: the "host" argument must be a string']
    assert check(MAKE_URL, {"query": "a=b"}) == ['make_url: the "query" argument must be a map']
    assert check(MAKE_URL, {"port": "http"}) == ['make_url: invalid URL port "http"']
    assert check(MAKE_URL, {"port": 0}) == [
        "make_url: invalid URL port 0, must be in range 1-65535"
    ]
    assert check(MAKE_URL, {"port": "70000"}) == [
        "make_url: invalid URL port 70000, must be in range 1-65535"
    ]
    assert check(MAKE_URL, {"scheme": "http:"}) == [
        'make_url: the "scheme" argument must not contain ":"'
    ]
    assert check(MAKE_URL, {"host": dyn(5), "port": dyn("x"), "query": dyn(1)}) == []
    assert eval_error(MAKE_URL, {"host": dyn(None)}) == (
        'make_url: the "host" argument must be a string'
    )
    assert eval_error(MAKE_URL, {"port": dyn(None)}) == 'make_url: invalid URL port "None"'
    assert eval_error(MAKE_URL, {"scheme": dyn("a:b")}) == (
        'make_url: the "scheme" argument must not contain ":"'
    )


def test_check_reports_at_the_call_path() -> None:
    ctx = Ctx()
    fn_call = call(STR_SPLIT, "bad")
    fn_call.path = ("resources", "web", "properties", "name")
    STR_SPLIT.check(fn_call, ctx)  # type: ignore[arg-type]
    assert ctx.errors == [(
        "resources.web.properties.name",
        "str_split: arguments must be [delimiter, string] or [delimiter, string, index]",
        "function",
    )]
    assert Res().resolve([call(ELIDE, None), {"k": call(ELIDE, None)}]) == [{}]
