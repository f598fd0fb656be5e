"""The yaql function: expressions over data, Heat's limits, and syntax errors found early."""

from __future__ import annotations

from convergence.template.functions import yaql_expr
from convergence.template.functions.yaql_expr import YAQL

from .fn_helpers import check, dyn, eval_error, evaluate


def test_yaql_evaluates_over_data() -> None:
    assert evaluate(YAQL, {"expression": "$.data.var1.sum()", "data": {"var1": [1, 2, 3, 4]}}) == 10
    assert evaluate(YAQL, {"expression": "$.data.sum()", "data": [1, 2, 3, 4]}) == 10
    assert evaluate(YAQL, {"expression": "$.data", "data": "whynotastring"}) == "whynotastring"
    assert evaluate(YAQL, {"expression": "$.data + 2", "data": dyn(2)}) == 4
    assert evaluate(YAQL, {"expression": "1 + 3"}) == 4  # data defaults to {}


def test_yaql_returns_plain_data() -> None:
    merged = evaluate(YAQL, {
        "expression": "$.data.d.reduce($1.mergeWith($2))",
        "data": {"d": [{"a": [1]}, {"a": [2]}, {"a": [3]}]},
    })
    assert merged == {"a": [1, 2, 3]}
    # Tuples come back as lists, sets as sorted lists.
    assert evaluate(YAQL, {"expression": "$.data.select($ * 2)", "data": [1, 2]}) == [2, 4]
    assert evaluate(YAQL, {"expression": "$.data.toSet()", "data": [3, 1, 3]}) == [1, 3]


def test_yaql_expression_may_come_from_a_function() -> None:
    args = {"expression": dyn("$.data.x.len()"), "data": {"x": dyn("ab")}}
    assert check(YAQL, args) == []
    assert evaluate(YAQL, args) == 2


def test_yaql_shape_errors() -> None:
    shape = 'yaql: arguments must be a map with "expression" and optional "data"'
    assert check(YAQL, "invalid") == [shape]
    assert check(YAQL, {"wrong": "wrong_expr", "wrong_data": "mustbeamap"}) == [shape]
    assert check(YAQL, {"expression": "1 + 3", "data": {}, "bogus": ""}) == [shape]
    assert check(YAQL, dyn({"expression": "1"})) == [shape]
    assert check(YAQL, {"expression": 5}) == ['yaql: the "expression" argument must be a string']
    assert eval_error(YAQL, {"expression": dyn(["x"])}) == (
        'yaql: the "expression" argument must be a string'
    )


def test_yaql_syntax_errors_are_reported_by_check() -> None:
    assert check(YAQL, {"expression": "invalid(", "data": {}}) == [
        "yaql: bad expression: Parse error: unexpected end of statement"
    ]
    assert check(YAQL, {"expression": "$.data.#"}) == [
        "yaql: bad expression: Lexical error: illegal character '#' at position 7"
    ]
    assert eval_error(YAQL, {"expression": dyn("a b")}) == (
        "yaql: bad expression: Parse error: unexpected 'b' at position 2 of expression 'a b'"
    )


def test_yaql_evaluation_errors() -> None:
    assert eval_error(YAQL, {"expression": "foo()"}) == (
        'yaql: evaluation failed: Unknown function "foo"'
    )
    assert eval_error(YAQL, {"expression": "$.data.missing", "data": {}}) == (
        "yaql: evaluation failed: KeyError: 'missing'"
    )
    assert eval_error(YAQL, {"expression": "1 / 0"}) == (
        "yaql: evaluation failed: ZeroDivisionError: integer division or modulo by zero"
    )


def test_yaql_has_heats_collection_limit() -> None:
    assert yaql_expr.LIMIT_ITERATORS == 200
    assert yaql_expr.MEMORY_QUOTA == 10000
    assert evaluate(YAQL, {"expression": "range(200).len()"}) == 200
    assert eval_error(YAQL, {"expression": "range(1000).select($)"}) == (
        "yaql: evaluation failed: Collection length exceeds 200 elements"
    )
