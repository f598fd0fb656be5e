"""String intrinsic functions: join, replace, split, digest, base64 and URL building.

Defines the :class:`FunctionDef` values for ``list_join``, ``str_replace`` (plain, JSON, strict
and very strict), ``str_split``, ``digest``, ``make_url`` and the CFN ``Fn::Join``,
``Fn::Replace``, ``Fn::Split`` and ``Fn::Base64``. ``versions`` places them in each version's
table; the validator calls ``check`` once on the parsed arguments and the resolver calls
``evaluate``.

Behaviour and argument validation follow Heat's ``hot/functions.py`` and ``cfn/functions.py``,
quirks included (``list_join`` refuses numbers, ``str_split`` takes a negative index, a null
``str_replace`` param becomes the empty string): templates written for Heat rely on them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib import parse as urlparse

from convergence.template.errors import FUNCTION
from convergence.template.functions.base import (
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    has_calls,
    shape_error,
)


class _Invalid(Exception):
    """A bad argument value, reported by ``check`` or raised as ``fail`` by ``evaluate``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _report(ctx: CheckContext, call: Call, message: str) -> None:
    ctx.error(call.path, f"{call.name}: {message}", FUNCTION)


def _is_seq(value: Any) -> bool:
    """A list in resolved data (Heat's ``Sequence`` that is not a string)."""
    return isinstance(value, (list, tuple))


def _show(value: Any) -> str:
    # Heat caps the echoed value so one huge item does not swamp the message.
    return repr(value)[:200]


def _to_json(value: Any) -> str:
    """Serialize a list or map as Heat does (``jsonutils.dumps(.., sort_keys=True)``)."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise _Invalid(f"{_show(value)} failed JSON serialization: {exc}") from exc


# --- list_join / Fn::Join -----------------------------------------------------------------

_JOIN_SHAPE = "[delimiter, [string, ...]]"
_JOIN_MULTI_SHAPE = "[delimiter, [string, ...], ...]"


def _check_delimiter(ctx: CheckContext, call: Call, delim: Any) -> None:
    if not isinstance(delim, (Call, str)):
        _report(ctx, call, "the delimiter must be a string")


def _check_join(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, _JOIN_SHAPE)
        return
    _check_delimiter(ctx, call, args[0])
    strings = args[1]
    if strings is None or isinstance(strings, Call):
        return
    if not isinstance(strings, list):
        _report(ctx, call, "must operate on a list")
        return
    for item in strings:
        if not isinstance(item, (Call, str)) and item is not None:
            _report(ctx, call, f"items to join must be strings, not {_show(item)}")


def _eval_join(call: Call, res: Resolver) -> str:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, f"arguments must be {_JOIN_SHAPE}")
    strings = res.resolve(args[1])
    if strings is None:
        strings = []
    if not _is_seq(strings):
        raise fail(call, "must operate on a list")
    delim = res.resolve(args[0])
    if not isinstance(delim, str):
        raise fail(call, "the delimiter must be a string")
    for item in strings:
        if item is not None and not isinstance(item, str):
            raise fail(call, f"items to join must be strings, not {_show(item)}")
    return delim.join(item or "" for item in strings)


def _join_item(item: Any) -> str:
    """An item of a multi-list join: strings as-is, lists and maps as JSON (2015-10-15+)."""
    if item is None:
        return ""
    if isinstance(item, str):
        return item
    if isinstance(item, (dict, list, tuple)):
        return _to_json(item)
    raise _Invalid(f"items to join must be strings, maps or lists, not {_show(item)}")


def _check_join_multi(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) < 2:
        shape_error(ctx, call, _JOIN_MULTI_SHAPE)
        return
    _check_delimiter(ctx, call, args[0])
    for strings in args[1:]:
        # Heat skips empty values of any type; only a non-empty non-list is refused.
        if isinstance(strings, Call) or not strings:
            continue
        if not isinstance(strings, list):
            _report(ctx, call, "must operate on a list")
            continue
        for item in strings:
            if not isinstance(item, Call) and not has_calls(item):
                try:
                    _join_item(item)
                except _Invalid as exc:
                    _report(ctx, call, exc.message)


def _eval_join_multi(call: Call, res: Resolver) -> str:
    args = call.args
    if not isinstance(args, list) or len(args) < 2:
        raise fail(call, f"arguments must be {_JOIN_MULTI_SHAPE}")
    strings: list[Any] = []
    for joined in res.resolve(args[1:]):
        if joined:
            if not _is_seq(joined):
                raise fail(call, "must operate on a list")
            strings.extend(joined)
    delim = res.resolve(args[0])
    if not isinstance(delim, str):
        raise fail(call, "the delimiter must be a string")
    try:
        return delim.join(_join_item(item) for item in strings)
    except _Invalid as exc:
        raise fail(call, exc.message) from exc


LIST_JOIN = FunctionDef(
    "list_join", _eval_join, _check_join, doc="Join a list of strings (2013-05-23 to 2015-04-30)."
)
LIST_JOIN_MULTI = FunctionDef(
    "list_join", _eval_join_multi, _check_join_multi,
    doc="Join one or more lists; list and map items become JSON (2015-10-15+).",
)
FN_JOIN = FunctionDef("Fn::Join", _eval_join, _check_join, doc="CFN form of list_join.")


# --- str_replace and its variants / Fn::Replace --------------------------------------------


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


def _empty_value(param: str) -> _Invalid:
    return _Invalid(
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
        raise _Invalid(f"params must be strings or numbers, param {param} is not valid")
    elif isinstance(value, (dict, list, tuple)):
        if not rules.allow_empty and len(value) == 0:
            raise _empty_value(param)
        text = _to_json(value)
    else:
        raise _Invalid("params must be strings, numbers, lists or maps")
    if not rules.allow_empty and not text:
        raise _empty_value(param)
    return text


def _replace_order(params: dict[Any, Any]) -> list[str]:
    """Heat's order: longest placeholder first, ties broken lexicographically."""
    if not all(isinstance(key, str) for key in params):
        raise _Invalid("param placeholders must be strings")
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
            raise _Invalid("param placeholders must not be empty")
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


def _not_found(order: list[str], found: set[str]) -> _Invalid | None:
    missing = [key for key in order if key not in found]
    if not missing:
        return None
    return _Invalid(f"the following params were not found in the template: {','.join(missing)}")


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
            raise _Invalid(f"params must be strings or numbers, param {param} is not valid")
        return
    _replacement(rules, value, param)


def _check_replace_params(
    ctx: CheckContext, call: Call, rules: _ReplaceRules, params: dict[Any, Any], template: Any
) -> None:
    try:
        order = _replace_order(params)
    except _Invalid as exc:
        _report(ctx, call, exc.message)
        return
    for key in order:
        try:
            _check_param_value(rules, params[key], key)
        except _Invalid as exc:
            _report(ctx, call, exc.message)
    if "" in order:
        _report(ctx, call, "param placeholders must not be empty")
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
        _report(ctx, call, missing.message)


def _replace_def(name: str, rules: _ReplaceRules, doc: str) -> FunctionDef:
    shape = _FN_REPLACE_SHAPE if rules.cfn else _REPLACE_SHAPE

    def check(call: Call, ctx: CheckContext) -> None:
        parts = _replace_parts(call.args, rules)
        if parts is None:
            shape_error(ctx, call, shape)
            return
        params, template = parts
        if not isinstance(template, (Call, str)):
            _report(ctx, call, "the template must be a string")
        if isinstance(params, dict):
            _check_replace_params(ctx, call, rules, params, template)
        elif not isinstance(params, Call):
            _report(ctx, call, "params must be a map")

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
        except _Invalid as exc:
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


# --- str_split / Fn::Split -----------------------------------------------------------------

_SPLIT_SHAPE = "[delimiter, string] or [delimiter, string, index]"


def _index(value: Any) -> int:
    """Heat's ``int(index)``: numbers are truncated and numeric strings parsed."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise _Invalid(f"the index must be an integer, not {_show(value)}") from exc


def _split(delim: Any, text: str) -> list[str]:
    # Heat calls str.split(delim): a null delimiter therefore splits on whitespace.
    if delim is not None and not isinstance(delim, str):
        raise _Invalid("the delimiter must be a string")
    if delim == "":
        raise _Invalid("the delimiter must not be empty")
    return text.split(delim)


def _check_str_split(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if isinstance(args, Call):
        return
    # Heat reads the first three items and ignores any more.
    if not isinstance(args, list) or len(args) < 2:
        shape_error(ctx, call, _SPLIT_SHAPE)
        return
    delim, text = args[0], args[1]
    if not isinstance(delim, Call) and delim is not None and not isinstance(delim, str):
        _report(ctx, call, "the delimiter must be a string")
    if delim == "":
        _report(ctx, call, "the delimiter must not be empty")
    if not isinstance(text, (Call, str)) and text is not None:
        _report(ctx, call, "the value to split must be a string")
    if len(args) > 2 and not isinstance(args[2], Call):
        try:
            _index(args[2])
        except _Invalid as exc:
            _report(ctx, call, exc.message)


def _eval_str_split(call: Call, res: Resolver) -> Any:
    args = res.resolve(call.args)
    if not isinstance(args, list) or len(args) < 2:
        raise fail(call, f"arguments must be {_SPLIT_SHAPE}")
    text = args[1]
    if text is None:
        return None
    if not isinstance(text, str):
        raise fail(call, "the value to split must be a string")
    try:
        parts = _split(args[0], text)
        if len(args) < 3:
            return parts
        index = _index(args[2])
    except _Invalid as exc:
        raise fail(call, exc.message) from exc
    try:
        return parts[index]  # a negative index counts from the end, as in Heat
    except IndexError:
        raise fail(call, f"the index must be between 0 and {len(parts) - 1}") from None


def _check_fn_split(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, "[delimiter, string]")
        return
    # Heat checks the delimiter before resolving it, so even a function there is refused.
    if not isinstance(args[0], str):
        _report(ctx, call, "the delimiter must be a string")
    elif args[0] == "":
        _report(ctx, call, "the delimiter must not be empty")
    if not isinstance(args[1], (Call, str)):
        _report(ctx, call, "the value to split must be a string")


def _eval_fn_split(call: Call, res: Resolver) -> list[str]:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, "arguments must be [delimiter, string]")
    text = res.resolve(args[1])
    if not isinstance(args[0], str):
        raise fail(call, "the delimiter must be a string")
    if not isinstance(text, str):
        raise fail(call, f"the value to split must be a string, not {type(text).__name__}")
    try:
        return _split(args[0], text)
    except _Invalid as exc:
        raise fail(call, exc.message) from exc


STR_SPLIT = FunctionDef(
    "str_split", _eval_str_split, _check_str_split,
    doc="Split a string, optionally picking one item (2015-10-15+).",
)
FN_SPLIT = FunctionDef("Fn::Split", _eval_fn_split, _check_fn_split, doc="CFN string split.")


# --- digest / Fn::Base64 -------------------------------------------------------------------

# Heat allows whatever hashlib offers on its host (md5, sha1, sha224, sha256, sha384, sha512
# plus OpenSSL extras). The guaranteed set keeps results the same on every host; the SHAKE
# algorithms are left out because their hex digest needs a length Heat never passes.
ALGORITHMS: frozenset[str] = frozenset(
    name for name in hashlib.algorithms_guaranteed if not name.startswith("shake_")
)
_DIGEST_SHAPE = "[algorithm, value]"


def _algorithm(name: str) -> str:
    algorithm = name.lower()
    if algorithm not in ALGORITHMS:
        raise _Invalid(f"algorithm must be one of {', '.join(sorted(ALGORITHMS))}")
    return algorithm


def _check_digest(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if isinstance(args, Call):
        return
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, _DIGEST_SHAPE)
        return
    if not all(isinstance(a, (Call, str)) for a in args):
        _report(ctx, call, "arguments must be a list of strings")
        return
    if isinstance(args[0], str):
        try:
            _algorithm(args[0])
        except _Invalid as exc:
            _report(ctx, call, exc.message)


def _eval_digest(call: Call, res: Resolver) -> str:
    args = res.resolve(call.args)
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise fail(call, "arguments must be a list of strings")
    if len(args) != 2:
        raise fail(call, f"arguments must be {_DIGEST_SHAPE}")
    try:
        algorithm = _algorithm(args[0])
        # Heat hashes six.b(value), which on Python 3 is the Latin-1 encoding.
        data = args[1].encode("latin-1")
    except _Invalid as exc:
        raise fail(call, exc.message) from exc
    except UnicodeEncodeError:
        raise fail(call, "the value must contain only Latin-1 characters") from None
    return hashlib.new(algorithm, data, usedforsecurity=False).hexdigest()


def _check_base64(call: Call, ctx: CheckContext) -> None:
    if not isinstance(call.args, (Call, str)):
        _report(ctx, call, "the argument must be a string")


def _eval_base64(call: Call, res: Resolver) -> str:
    # Heat performs no encoding: user data is passed to servers as plain text.
    value = res.resolve(call.args)
    if not isinstance(value, str):
        raise fail(call, "the argument must be a string")
    return value


DIGEST = FunctionDef(
    "digest", _eval_digest, _check_digest, doc="Hex digest of a string (2015-04-30+)."
)
FN_BASE64 = FunctionDef(
    "Fn::Base64", _eval_base64, _check_base64, doc="CFN Base64: returns the string unchanged."
)


# --- make_url ------------------------------------------------------------------------------

_URL_KEYS = ("scheme", "username", "password", "host", "port", "path", "query", "fragment")


def _port_problem(port: Any) -> str | None:
    if isinstance(port, int):
        number = port
    else:
        try:
            number = int(port)
        except (TypeError, ValueError, OverflowError):
            return f'invalid URL port "{port}"'
    if not 0 < number <= 65535:
        return f"invalid URL port {number}, must be in range 1-65535"
    return None


def _url_problems(args: dict[Any, Any]) -> list[str]:
    """What is wrong with make_url arguments whose values are known (calls are skipped)."""
    problems: list[str] = []
    invalid = sorted(str(key) for key in args if key not in _URL_KEYS)
    if invalid:
        problems.append(f"invalid arguments: {', '.join(invalid)}")
    for key in _URL_KEYS:
        value = args.get(key)
        if key not in args or isinstance(value, Call):
            continue
        if key == "query":
            if not isinstance(value, dict):
                problems.append('the "query" argument must be a map')
        elif key == "port":
            problem = _port_problem(value)
            if problem:
                problems.append(problem)
        elif not isinstance(value, str):
            problems.append(f'the "{key}" argument must be a string')
    scheme = args.get("scheme")
    if isinstance(scheme, str) and ":" in scheme:
        problems.append('the "scheme" argument must not contain ":"')
    return problems


def _netloc(args: dict[str, Any]) -> str:
    parts: list[str] = []
    username = urlparse.quote(args.get("username", ""), safe="")
    password = urlparse.quote(args.get("password", ""), safe="")
    if username or password:
        parts.append(username)
        if password:
            parts += [":", password]
        parts.append("@")
    host: str = args.get("host", "")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = urlparse.quote(host, safe=":")
    # A colon left in the host can only be an IPv6 address, which a URL must bracket.
    if ":" in host:
        host = f"[{host}]"
    parts.append(host)
    port = args.get("port", "")
    if port:
        parts += [":", str(port)]
    return "".join(parts)


def _build_url(args: dict[str, Any]) -> str:
    path = urlparse.quote(args.get("path", ""))
    # Heat keeps slashes in query values readable.
    query = urlparse.urlencode(args.get("query", {})).replace("%2F", "/")
    fragment = urlparse.quote(args.get("fragment", ""))
    scheme: str = args.get("scheme", "")
    return urlparse.urlunsplit((scheme, _netloc(args), path, query, fragment))


def _check_make_url(call: Call, ctx: CheckContext) -> None:
    if not isinstance(call.args, dict):
        _report(ctx, call, "arguments must be a map")
        return
    for problem in _url_problems(call.args):
        _report(ctx, call, problem)


def _eval_make_url(call: Call, res: Resolver) -> str:
    args = res.resolve(call.args)
    if not isinstance(args, dict):
        raise fail(call, "arguments must be a map")
    problems = _url_problems(args)
    if problems:
        raise fail(call, problems[0])
    return _build_url(args)


MAKE_URL = FunctionDef(
    "make_url", _eval_make_url, _check_make_url, doc="Build an escaped URL from parts (pike+)."
)
