"""The replace intrinsic functions: ``str_replace`` and its variants, and ``Fn::Replace``.

Defines the five :class:`FunctionDef` values (``str_replace`` plain and JSON,
``str_replace_strict``, ``str_replace_vstrict``, ``Fn::Replace``), which differ only in the
rules they are built with. ``versions`` places them in each version's table; the validator
calls ``check`` once on the parsed arguments and the resolver calls ``evaluate``. Helpers
shared with the other string functions (argument errors, JSON rendering) live in ``strings``.

Behaviour and argument validation follow Heat's ``hot/functions.py`` (``Replace`` and its
subclasses) and ``cfn/functions.py``, quirks included (a null param becomes the empty string,
booleans render as ``True``/``False``, the longest placeholder is replaced first).
"""

from __future__ import annotations

from dataclasses import dataclass
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
from convergence.template.functions.strings import InvalidArgument, to_json


@dataclass(frozen=True, slots=True)
class _ReplaceRules:
    """What one replace function accepts: the five variants differ only in these switches."""

    json_values: bool = False  # lists and maps are substituted as JSON (2015-10-15+)
    strict: bool = False  # every param must occur in the template (ocata+)
    allow_empty: bool = True  # a null or empty param value is allowed (false in pike+ vstrict)
    cfn: bool = False  # arguments are [params, template] rather than a map


_REPLACE_SHAPE = 'a map with "template" and "params"'
_FN_REPLACE_SHAPE = "[{params}, template]"


def _replace_parts(args: Any, rules: _ReplaceRules) -> tuple[Any, Any] | None:
    """The (params, template) of a replace call, or None when the arguments have the wrong shape."""
    if rules.cfn:
        if isinstance(args, list) and len(args) == 2:
            return args[0], args[1]
        return None
    if isinstance(args, dict) and "params" in args and "template" in args:
        return args["params"], args["template"]
    return None


def _empty_value(param: str) -> InvalidArgument:
    return InvalidArgument(
        f"param {param} has an undefined or empty value; it must be a defined non-empty value"
    )


def _replacement(rules: _ReplaceRules, value: Any, param: str) -> str:
    """The text a param value is replaced by, validated as Heat's ``_validate_replacement``."""
    if value is None:
        if not rules.allow_empty:
            raise _empty_value(param)
        return ""
    if isinstance(value, (str, int, float)):  # bool is an int: Heat renders "True"/"False"
        text = str(value)
    elif not rules.json_values:
        raise InvalidArgument(f"params must be strings or numbers, param {param} is not valid")
    elif isinstance(value, (dict, list, tuple)):
        if not rules.allow_empty and len(value) == 0:
            raise _empty_value(param)
        text = to_json(value)
    else:
        raise InvalidArgument("params must be strings, numbers, lists or maps")
    if not rules.allow_empty and not text:
        raise _empty_value(param)
    return text


def _replace_order(params: dict[Any, Any]) -> list[str]:
    """Heat's order: longest placeholder first, ties broken lexicographically."""
    if not all(isinstance(key, str) for key in params):
        raise InvalidArgument("param placeholders must be strings")
    return sorted(sorted(params), key=len, reverse=True)


def _substitute(template: str, order: list[str], values: dict[str, str]) -> tuple[str, set[str]]:
    """Replace placeholders in ``order``; return the text and the placeholders found.

    Heat splits the template on the first placeholder, then each piece on the next, and joins
    back with the values, so inserted values are never searched again and a shorter placeholder
    is not found inside a longer one that already matched. Segments marked ``True`` are still
    searchable text; this is the same algorithm without Heat's recursion per placeholder.
    """
    segments: list[tuple[bool, str]] = [(True, template)]
    found: set[str] = set()
    for key in order:
        if key == "":
            raise InvalidArgument("param placeholders must not be empty")
        next_segments: list[tuple[bool, str]] = []
        for searchable, text in segments:
            if not searchable:
                next_segments.append((False, text))
                continue
            pieces = text.split(key)
            if len(pieces) > 1:
                found.add(key)
            for i, piece in enumerate(pieces):
                if i:
                    next_segments.append((False, values[key]))
                next_segments.append((True, piece))
        segments = next_segments
    return "".join(text for _, text in segments), found


def _not_found(order: list[str], found: set[str]) -> InvalidArgument | None:
    missing = [key for key in order if key not in found]
    if not missing:
        return None
    return InvalidArgument(
        f"the following params were not found in the template: {','.join(missing)}")


def _replace(rules: _ReplaceRules, template: str, params: dict[Any, Any]) -> str:
    order = _replace_order(params)
    values: dict[str, str] = {}
    for key in order:
        values[key] = _replacement(rules, params[key], key)
    text, found = _substitute(template, order, values)
    if rules.strict:
        missing = _not_found(order, found)
        if missing is not None:
            raise missing
    return text


def _check_param_value(rules: _ReplaceRules, value: Any, param: str) -> None:
    if isinstance(value, Call):
        return
    if has_calls(value):
        # A list or map still holding calls: its type is known, its content (and so whether it
        # is empty) is not.
        if not rules.json_values:
            raise InvalidArgument(f"params must be strings or numbers, param {param} is not valid")
        return
    _replacement(rules, value, param)


def _check_replace_params(
    ctx: CheckContext, call: Call, rules: _ReplaceRules, params: dict[Any, Any], template: Any
) -> None:
    try:
        order = _replace_order(params)
    except InvalidArgument as exc:
        report(ctx, call, exc.message)
        return
    for key in order:
        try:
            _check_param_value(rules, params[key], key)
        except InvalidArgument as exc:
            report(ctx, call, exc.message)
    if "" in order:
        report(ctx, call, "param placeholders must not be empty")
        return
    if not isinstance(template, str):
        return
    # Which placeholders occur depends only on the keys, so a literal template can be checked
    # now, with stand-in values.
    _, found = _substitute(template, order, dict.fromkeys(order, ""))
    # A param whose value is a call may be dropped by a two-argument if; leave it to evaluation.
    found |= {key for key in order if isinstance(params[key], Call)}
    missing = _not_found(order, found) if rules.strict else None
    if missing is not None:
        report(ctx, call, missing.message)


def _replace_def(name: str, rules: _ReplaceRules, doc: str) -> FunctionDef:
    shape = _FN_REPLACE_SHAPE if rules.cfn else _REPLACE_SHAPE

    def check(call: Call, ctx: CheckContext) -> None:
        parts = _replace_parts(call.args, rules)
        if parts is None:
            shape_error(ctx, call, shape)
            return
        params, template = parts
        if not isinstance(template, (Call, str)):
            report(ctx, call, "the template must be a string")
        if isinstance(params, dict):
            _check_replace_params(ctx, call, rules, params, template)
        elif not isinstance(params, Call):
            report(ctx, call, "params must be a map")

    def evaluate(call: Call, res: Resolver) -> str:
        parts = _replace_parts(call.args, rules)
        if parts is None:
            raise fail(call, f"arguments must be {shape}")
        template = res.resolve(parts[1])
        params = res.resolve(parts[0])
        if not isinstance(template, str):
            raise fail(call, "the template must be a string")
        if not isinstance(params, dict):
            raise fail(call, "params must be a map")
        try:
            return _replace(rules, template, params)
        except InvalidArgument as exc:
            raise fail(call, exc.message) from exc

    return FunctionDef(name, evaluate, check, doc=doc)


STR_REPLACE = _replace_def(
    "str_replace", _ReplaceRules(), "Substitute string or number params (up to 2015-04-30)."
)
STR_REPLACE_JSON = _replace_def(
    "str_replace", _ReplaceRules(json_values=True),
    "Substitute params; list and map values become JSON (2015-10-15+).",
)
STR_REPLACE_STRICT = _replace_def(
    "str_replace_strict", _ReplaceRules(json_values=True, strict=True),
    "str_replace that fails when a param is not in the template (ocata+).",
)
STR_REPLACE_VSTRICT = _replace_def(
    "str_replace_vstrict", _ReplaceRules(json_values=True, strict=True, allow_empty=False),
    "str_replace_strict that also fails on null or empty param values (pike+).",
)
FN_REPLACE = _replace_def("Fn::Replace", _ReplaceRules(cfn=True), "CFN form of str_replace.")
