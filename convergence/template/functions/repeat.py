"""The ``repeat`` intrinsic function, in its three generations.

Defines :data:`REPEAT` (2015-04-30: a copy of the template for every combination of items of
the lists), :data:`REPEAT_WITH_MAP` (newton: the keys of a map may be looped over too) and
:data:`REPEAT_PERMUTATIONS` (pike: ``permutations: false`` zips equal-length lists instead).
``versions`` places them in each version's table; the validator calls ``check`` once on the
parsed arguments and the resolver calls ``evaluate``.

Behaviour and argument validation follow Heat's ``hot/functions.py`` (``Repeat`` and its
subclasses).
"""

from __future__ import annotations

import itertools
from typing import Any

from convergence.template.functions.base import (
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    has_calls,
    report,
    shape_error,
)

_REPEAT_SHAPE = 'a map with "for_each" and "template"'


def _valid_loop_value(value: Any, maps: bool) -> bool:
    # Iterating a map gives its keys (newton+); with permutations off only lists are allowed
    # because the lists are zipped by position.
    return isinstance(value, (list, tuple)) or (maps and isinstance(value, dict))


def _loop_kind(maps: bool) -> str:
    return "lists or maps" if maps else "lists"


def _check_for_each(ctx: CheckContext, call: Call, for_each: Any, maps: bool,
                    nested: bool) -> None:
    if isinstance(for_each, Call):
        return
    if not isinstance(for_each, dict):
        report(ctx, call, 'the "for_each" argument must contain a map')
        return
    if not for_each:
        report(ctx, call, 'the "for_each" argument must not be empty')
        return
    lengths: set[int] = set()
    for value in for_each.values():
        if isinstance(value, Call) or value is None:
            continue
        if not _valid_loop_value(value, maps and nested):
            report(ctx, call, f'the values of the "for_each" argument must be '
                              f"{_loop_kind(maps and nested)}")
            return
        if not has_calls(value):
            lengths.add(len(value))
    if not nested and len(lengths) > 1:
        report(ctx, call, "the for_each lists must have equal lengths when permutations is false")


def _repeat_def(*, maps: bool, permutations: bool, doc: str) -> FunctionDef:
    """One generation of ``repeat``: lists only, lists or maps, and with ``permutations``."""

    def check(call: Call, ctx: CheckContext) -> None:
        args = call.args
        if not isinstance(args, dict) or "for_each" not in args or "template" not in args:
            shape_error(ctx, call, _REPEAT_SHAPE)
            return
        nested = True
        if permutations and "permutations" in args:
            # Heat reads the flag while parsing, so it must be a literal boolean.
            if not isinstance(args["permutations"], bool):
                report(ctx, call, '"permutations" must be a boolean')
                return
            nested = args["permutations"]
        _check_for_each(ctx, call, args["for_each"], maps, nested)

    def evaluate(call: Call, res: Resolver) -> list[Any]:
        args = call.args
        if not isinstance(args, dict) or "for_each" not in args or "template" not in args:
            raise fail(call, f"arguments must be {_REPEAT_SHAPE}")
        nested = res.resolve(args.get("permutations", True)) if permutations else True
        if not isinstance(nested, bool):
            raise fail(call, '"permutations" must be a boolean')
        keys, lists = _loop_lists(call, res.resolve(args["for_each"]), maps and nested, nested)
        template = res.resolve(args["template"])
        combos = itertools.product(*lists) if nested else zip(*lists, strict=False)
        return [_fill(call, keys, combo, template) for combo in combos]

    return FunctionDef("repeat", evaluate, check, doc=doc)


def _loop_lists(call: Call, for_each: Any, maps: bool,
                nested: bool) -> tuple[list[Any], list[list[Any]]]:
    """The placeholders and the lists they range over, validated as Heat does."""
    if not isinstance(for_each, dict):
        raise fail(call, 'the "for_each" argument must contain a map')
    if not for_each:
        raise fail(call, 'the "for_each" argument must not be empty')
    lists: list[list[Any]] = []
    lengths: set[int] = set()
    for value in for_each.values():
        if value is None:  # an unresolved reference: loop over nothing
            lists.append([])
            continue
        if not _valid_loop_value(value, maps):
            raise fail(call, f'the values of the "for_each" argument must be {_loop_kind(maps)}')
        lists.append(list(value))
        lengths.add(len(value))
    if not nested and len(lengths) > 1:
        raise fail(call, "the for_each lists must have equal lengths when permutations is false")
    return list(for_each), lists


def _fill(call: Call, keys: list[Any], values: tuple[Any, ...], template: Any) -> Any:
    """One copy of the template with placeholders replaced in every string, keys included."""
    if isinstance(template, str):
        # Sequential str.replace, as Heat: a later placeholder is also replaced inside the
        # value of an earlier one, and a non-string value is an error.
        for key, value in zip(keys, values, strict=True):
            if not isinstance(key, str) or not isinstance(value, str):
                raise fail(call, f"cannot substitute {value!r} for {key!r}: "
                                 "placeholders and their values must be strings")
            template = template.replace(key, value)
        return template
    if isinstance(template, list):
        return [_fill(call, keys, values, item) for item in template]
    if isinstance(template, dict):
        return {_fill(call, keys, values, k): _fill(call, keys, values, v)
                for k, v in template.items()}
    return template


REPEAT = _repeat_def(
    maps=False, permutations=False,
    doc="Copy a template for each item of one or more lists (2015-04-30 to 2016-04-08).",
)
REPEAT_WITH_MAP = _repeat_def(
    maps=True, permutations=False,
    doc="repeat that also loops over the keys of maps (newton and ocata).",
)
REPEAT_PERMUTATIONS = _repeat_def(
    maps=True, permutations=True,
    doc="repeat with 'permutations': false zips equal-length lists (pike+).",
)
