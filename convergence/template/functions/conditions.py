"""The condition functions (``equals``, ``not``, ``and``, ``or``) and ``if``.

A condition operand is a condition name, a boolean, or a condition function call; the
resolver's ``condition`` turns any of them into a boolean. ``if`` picks a branch by a
condition; from 2021-04-16 its two-argument form removes the enclosing item when false.
``versions`` places them in the function and condition tables of newton and later; the parser
calls ``check`` once on the parsed arguments and the resolver calls ``evaluate``.
"""

from __future__ import annotations

from typing import Any

from convergence.template.functions.base import (
    ELIDED,
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    shape_error,
)


def _check_equals(call: Call, ctx: CheckContext) -> None:
    if not isinstance(call.args, list) or len(call.args) != 2:
        shape_error(ctx, call, "a list [value_1, value_2]")


def _equals(call: Call, res: Resolver) -> Any:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, "arguments must be a list [value_1, value_2]")
    return res.resolve(args[0]) == res.resolve(args[1])


EQUALS = FunctionDef("equals", _equals, _check_equals)


def _check_not(call: Call, ctx: CheckContext) -> None:
    ctx.check_condition(call.args, (*call.path, "not"))


def _not(call: Call, res: Resolver) -> Any:
    return not res.condition(call.args, call.path)


NOT = FunctionDef("not", _not, _check_not)


def _make_junction(name: str, combine: Any) -> FunctionDef:
    def check(call: Call, ctx: CheckContext) -> None:
        if not isinstance(call.args, list) or len(call.args) < 2:
            shape_error(ctx, call, "a list of at least two conditions")
            return
        for i, operand in enumerate(call.args):
            ctx.check_condition(operand, (*call.path, i))

    def evaluate(call: Call, res: Resolver) -> Any:
        if not isinstance(call.args, list) or len(call.args) < 2:
            raise fail(call, "arguments must be a list of at least two conditions")
        return combine(res.condition(c, (*call.path, i)) for i, c in enumerate(call.args))

    return FunctionDef(name, evaluate, check)


AND = _make_junction("and", all)
OR = _make_junction("or", any)


def _make_if(elide: bool) -> FunctionDef:
    form = "[condition, value_if_true] or [condition, value_if_true, value_if_false]" if elide \
        else "[condition, value_if_true, value_if_false]"

    def shape_ok(args: Any) -> bool:
        return isinstance(args, list) and (len(args) == 3 or (elide and len(args) == 2))

    def check(call: Call, ctx: CheckContext) -> None:
        if not shape_ok(call.args):
            shape_error(ctx, call, f"a list {form}")
            return
        ctx.check_condition(call.args[0], (*call.path, 0))

    def evaluate(call: Call, res: Resolver) -> Any:
        if not shape_ok(call.args):
            raise fail(call, f"arguments must be a list {form}")
        if res.condition(call.args[0], call.path):
            return res.resolve(call.args[1])
        if len(call.args) == 2:
            return ELIDED
        return res.resolve(call.args[2])

    # The first argument is a condition: the parser reads it with the condition functions.
    return FunctionDef("if", evaluate, check, extra={"condition_arg": 0})


IF = _make_if(elide=False)
IF_ELIDE = _make_if(elide=True)
