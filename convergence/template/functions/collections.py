"""Collection intrinsic functions: map merging and replacing, list concat, filter and contains.

Defines the :class:`FunctionDef` values for ``map_merge``, ``map_replace``, ``list_concat``,
``list_concat_unique``, ``filter``, ``contains`` and the CFN ``Fn::Select`` and
``Fn::MemberListToMap`` (``repeat`` has its own module). ``versions`` places them in each
version's table; the validator calls ``check`` once on the parsed arguments and the resolver
calls ``evaluate``.

Behaviour and argument validation follow Heat's ``hot/functions.py`` and ``cfn/functions.py``,
including the forgiving parts (``Fn::Select`` out of range gives ``""``, ``filter`` passes an
empty list through, null lists count as empty).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from convergence.template.functions.base import (
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    is_seq,
    report,
    shape_error,
)

# --- map_merge / map_replace ---------------------------------------------------------------


def _known_non_map(value: Any) -> bool:
    return not isinstance(value, (Call, dict)) and value is not None


def _check_map_merge(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if isinstance(args, Call) or args == "":
        return
    if not isinstance(args, list):
        shape_error(ctx, call, "a list of maps")
        return
    if any(_known_non_map(item) for item in args):
        report(ctx, call, "items to merge must be maps")


def _eval_map_merge(call: Call, res: Resolver) -> dict[Any, Any]:
    args = res.resolve(call.args)
    if isinstance(args, str):
        args = list(args)  # Heat iterates a string: only the empty one merges to {}
    if not is_seq(args):
        raise fail(call, "arguments must be a list of maps")
    merged: dict[Any, Any] = {}
    for item in args:
        if item is None:
            continue
        if not isinstance(item, dict):
            raise fail(call, "items to merge must be maps")
        merged.update(item)
    return merged


_MAP_REPLACE_SHAPE = '[map, {"keys": map, "values": map}]'


def _check_map_replace(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if isinstance(args, Call):
        return
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, _MAP_REPLACE_SHAPE)
        return
    if _known_non_map(args[0]) or _known_non_map(args[1]):
        shape_error(ctx, call, _MAP_REPLACE_SHAPE)
        return
    if isinstance(args[1], dict):
        if any(key not in ("keys", "values") for key in args[1]):
            shape_error(ctx, call, _MAP_REPLACE_SHAPE)
            return
        if any(_known_non_map(v) for v in args[1].values()):
            shape_error(ctx, call, _MAP_REPLACE_SHAPE)


def _as_map(call: Call, value: Any) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(call, f"arguments must be {_MAP_REPLACE_SHAPE}")
    return value


def _new_key(call: Call, key: Any, in_map: dict[Any, Any], out_map: dict[Any, Any]) -> None:
    try:
        in_input = key in in_map
    except TypeError:
        raise fail(call, f"key replacement {key!r} cannot be a map key") from None
    if in_input:
        raise fail(call, f"key replacement {key} collides with a key in the input map")
    if key in out_map:
        raise fail(call, f"key replacement {key} collides with a key in the output map")


def _eval_map_replace(call: Call, res: Resolver) -> dict[Any, Any]:
    args = res.resolve(call.args)
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, f"arguments must be {_MAP_REPLACE_SHAPE}")
    in_map, rules = _as_map(call, args[0]), _as_map(call, args[1])
    if any(key not in ("keys", "values") for key in rules):
        raise fail(call, f"arguments must be {_MAP_REPLACE_SHAPE}")
    new_keys = _as_map(call, rules.get("keys"))
    new_values = _as_map(call, rules.get("values"))
    out: dict[Any, Any] = {}
    for key, value in in_map.items():
        new_key = new_keys.get(key)
        # A null replacement leaves the key as it is; renaming a key to itself is allowed.
        if new_key is None or new_key == key:
            new_key = key
        else:
            _new_key(call, new_key, in_map, out)
        try:
            out[new_key] = new_values.get(value, value)
        except TypeError:  # a list or map value cannot be looked up, so it stays
            out[new_key] = value
    return out


MAP_MERGE = FunctionDef(
    "map_merge", _eval_map_merge, _check_map_merge, doc="Merge maps, later keys win (2016-04-08+)."
)
MAP_REPLACE = FunctionDef(
    "map_replace", _eval_map_replace, _check_map_replace,
    doc="Rename the keys and replace the values of a map (newton+).",
)


# --- list_concat / list_concat_unique ------------------------------------------------------


def _check_list_concat(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if isinstance(args, Call):
        return
    if not isinstance(args, list):
        shape_error(ctx, call, "a list of lists")
        return
    for item in args:
        if not isinstance(item, (Call, list)) and item is not None:
            report(ctx, call, "items to concat must be lists")
            return


def _concat(call: Call, res: Resolver) -> list[Any]:
    args = res.resolve(call.args)
    if not is_seq(args):
        raise fail(call, "arguments must be a list of lists")
    out: list[Any] = []
    for item in args:
        if item is None:
            continue
        if not is_seq(item):
            raise fail(call, "items to concat must be lists")
        out.extend(item)
    return out


def _eval_list_concat(call: Call, res: Resolver) -> list[Any]:
    return _concat(call, res)


def _eval_list_concat_unique(call: Call, res: Resolver) -> list[Any]:
    # The first occurrence wins, as in current Heat (Pike's release kept the last one). Items
    # are compared with ==, not hashed: maps and lists may be items.
    unique: list[Any] = []
    for item in _concat(call, res):
        if item not in unique:
            unique.append(item)
    return unique


LIST_CONCAT = FunctionDef(
    "list_concat", _eval_list_concat, _check_list_concat, doc="Concatenate lists (pike+)."
)
LIST_CONCAT_UNIQUE = FunctionDef(
    "list_concat_unique", _eval_list_concat_unique, _check_list_concat,
    doc="Concatenate lists, keeping the first of equal items (pike+).",
)


# --- filter / contains ---------------------------------------------------------------------


def _check_filter(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, "[values, list]")
        return
    values, sequence = args
    if isinstance(sequence, Call) or not sequence:
        return  # an empty list (or any empty value) is passed through without a look at values
    if not isinstance(sequence, list):
        report(ctx, call, "only works with lists")
    elif not isinstance(values, (Call, list)) and values:
        report(ctx, call, "the values to remove must be a list")


def _eval_filter(call: Call, res: Resolver) -> Any:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, "arguments must be [values, list]")
    sequence = res.resolve(args[1])
    if not sequence:
        return sequence
    if not isinstance(sequence, list):
        raise fail(call, "only works with lists")
    values = res.resolve(args[0])
    if not values:
        return sequence
    if not isinstance(values, list):
        raise fail(call, "the values to remove must be a list")
    return [item for item in sequence if item not in values]


def _check_contains(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, "[value, sequence]")
        return
    if not isinstance(args[1], (Call, list, str)):
        report(ctx, call, "the second argument must be a sequence")


def _eval_contains(call: Call, res: Resolver) -> bool:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, "arguments must be [value, sequence]")
    value = res.resolve(args[0])
    sequence = res.resolve(args[1])
    # A string is a sequence to Heat too: contains then tests for a substring.
    if not isinstance(sequence, (list, tuple, str)):
        raise fail(call, "the second argument must be a sequence")
    if isinstance(sequence, str) and not isinstance(value, str):
        raise fail(call, "only a string can be looked for in a string")
    return value in sequence


FILTER = FunctionDef(
    "filter", _eval_filter, _check_filter, doc="Remove values from a list (ocata+)."
)
CONTAINS = FunctionDef(
    "contains", _eval_contains, _check_contains, doc="Whether a value is in a sequence (pike+)."
)


# --- Fn::Select / Fn::MemberListToMap --------------------------------------------------------


def _check_select(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, "[index, collection]")
        return
    index, collection = args
    if isinstance(index, Call):
        return
    if isinstance(collection, dict) and not isinstance(index, str):
        report(ctx, call, "the index must be a string")
    elif isinstance(collection, list) and _select_index(index) is None:
        report(ctx, call, "the index must be an integer")


def _select_index(index: Any) -> int | None:
    # Heat tries int() and, failing that, keeps the original (which is then refused).
    if isinstance(index, int):
        return index
    try:
        return int(index)
    except (TypeError, ValueError, OverflowError):
        return None


def _eval_select(call: Call, res: Resolver) -> Any:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, "arguments must be [index, collection]")
    index = res.resolve(args[0])
    collection = res.resolve(args[1])
    if collection == "":
        # Other functions give "" for a value that is not available yet.
        return ""
    if isinstance(collection, str):
        try:
            collection = json.loads(collection)  # a list or map serialized as JSON
        except ValueError as exc:
            raise fail(call, str(exc)) from None
        except RecursionError:  # the parser recurses once per level
            raise fail(call, "the collection nests too deep") from None
    if isinstance(collection, dict):
        if not isinstance(index, str):
            raise fail(call, "the index must be a string")
        return collection.get(index, "")
    if is_seq(collection):
        position = _select_index(index)
        if position is None:
            raise fail(call, "the index must be an integer")
        try:
            return collection[position]
        except IndexError:
            return ""
    if collection is None:
        return ""
    raise fail(call, "the arguments are not fully resolved")


_MEMBER_SHAPE = "[key name, value name, ['.member.0.<key name>=<key>', ...]]"
_MEMBER_KEY = re.compile(r"\.member\.([0-9]+)\.(.*)")


def _check_member_list(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 3:
        shape_error(ctx, call, _MEMBER_SHAPE)
        return
    # Heat checks the two names before resolving them, so a function there is refused.
    if not isinstance(args[0], str):
        report(ctx, call, "the key name must be a string")
    if not isinstance(args[1], str):
        report(ctx, call, "the value name must be a string")
    members = args[2]
    if isinstance(members, list):
        if any(not isinstance(m, (Call, str)) for m in members):
            report(ctx, call, "member list items must be strings")
    elif not isinstance(members, (Call, str, dict)):
        report(ctx, call, "the member list must be a list")


def _member_pairs(call: Call, members: Iterable[Any]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for member in members:
        if not isinstance(member, str):
            raise fail(call, "member list items must be strings")
        name, sep, value = member.partition("=")
        if not sep:
            raise fail(call, f"member list item {member!r} has no '='")
        pairs[name] = value
    return pairs


def _eval_member_list(call: Call, res: Resolver) -> dict[str, str]:
    args = call.args
    if not isinstance(args, list) or len(args) != 3:
        raise fail(call, f"arguments must be {_MEMBER_SHAPE}")
    key_name, value_name = args[0], args[1]
    if not isinstance(key_name, str) or not isinstance(value_name, str):
        raise fail(call, "the key and value names must be strings")
    members = res.resolve(args[2])
    if not isinstance(members, (list, tuple, str, dict)):
        raise fail(call, "the member list must be a list")
    # As Heat's AWS helper: group '.member.<n>.<field>=<text>' by n, in numeric order, then
    # pair each group's key-name field with its value-name field.
    groups: dict[int, dict[str, str]] = {}
    entries = []
    for name, value in _member_pairs(call, members).items():
        match = _MEMBER_KEY.match(name)
        if match:
            entries.append((int(match.group(1)), match.group(2), value))
    for index, field, value in sorted(entries, key=lambda e: e[0]):
        groups.setdefault(index, {})[field] = value
    return {g[key_name]: g[value_name] for g in groups.values()
            if key_name in g and value_name in g}


FN_SELECT = FunctionDef(
    "Fn::Select", _eval_select, _check_select,
    doc="CFN item of a list or map; '' when out of range (to 2015-04-30).",
)
FN_MEMBER_LIST_TO_MAP = FunctionDef(
    "Fn::MemberListToMap", _eval_member_list, _check_member_list,
    doc="CFN conversion of an AWS member list to a map.",
)
