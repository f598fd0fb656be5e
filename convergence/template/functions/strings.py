"""String intrinsic functions: join, split, digest, base64 and URL building.

Defines the :class:`FunctionDef` values for ``list_join``, ``str_split``, ``digest``,
``make_url`` and the CFN ``Fn::Join``, ``Fn::Split`` and ``Fn::Base64``. ``versions`` places
them in each version's table; the validator calls ``check`` once on the parsed arguments and
the resolver calls ``evaluate``. The replace family (``str_replace`` and its variants,
``Fn::Replace``) is in ``replace``, which shares the helpers at the top of this module.

Behaviour and argument validation follow Heat's ``hot/functions.py`` and ``cfn/functions.py``,
quirks included (``list_join`` refuses numbers, ``str_split`` takes a negative index):
templates written for Heat rely on them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib import parse as urlparse

from convergence.template.functions.base import (
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    has_calls,
    is_seq,
    report,
    shape_error,
)


class InvalidArgument(Exception):
    """A bad argument value, reported by ``check`` or raised as ``fail`` by ``evaluate``.

    Shared with ``replace``, whose functions raise it through :func:`to_json` too.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _show(value: Any) -> str:
    # Heat caps the echoed value so one huge item does not swamp the message.
    return repr(value)[:200]


def to_json(value: Any) -> str:
    """Serialize a list or map as Heat does (``jsonutils.dumps(.., sort_keys=True)``)."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{_show(value)} failed JSON serialization: {exc}") from exc


# --- list_join / Fn::Join -----------------------------------------------------------------

_JOIN_SHAPE = "[delimiter, [string, ...]]"
_JOIN_MULTI_SHAPE = "[delimiter, [string, ...], ...]"


def _check_delimiter(ctx: CheckContext, call: Call, delim: Any) -> None:
    if not isinstance(delim, (Call, str)):
        report(ctx, call, "the delimiter must be a string")


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
        report(ctx, call, "must operate on a list")
        return
    for item in strings:
        if not isinstance(item, (Call, str)) and item is not None:
            report(ctx, call, f"items to join must be strings, not {_show(item)}")


def _eval_join(call: Call, res: Resolver) -> str:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        raise fail(call, f"arguments must be {_JOIN_SHAPE}")
    strings = res.resolve(args[1])
    if strings is None:
        strings = []
    if not is_seq(strings):
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
        return to_json(item)
    raise InvalidArgument(f"items to join must be strings, maps or lists, not {_show(item)}")


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
            report(ctx, call, "must operate on a list")
            continue
        for item in strings:
            if not isinstance(item, Call) and not has_calls(item):
                try:
                    _join_item(item)
                except InvalidArgument as exc:
                    report(ctx, call, exc.message)


def _eval_join_multi(call: Call, res: Resolver) -> str:
    args = call.args
    if not isinstance(args, list) or len(args) < 2:
        raise fail(call, f"arguments must be {_JOIN_MULTI_SHAPE}")
    strings: list[Any] = []
    for joined in res.resolve(args[1:]):
        if joined:
            if not is_seq(joined):
                raise fail(call, "must operate on a list")
            strings.extend(joined)
    delim = res.resolve(args[0])
    if not isinstance(delim, str):
        raise fail(call, "the delimiter must be a string")
    try:
        return delim.join(_join_item(item) for item in strings)
    except InvalidArgument as exc:
        raise fail(call, exc.message) from exc


LIST_JOIN = FunctionDef(
    "list_join", _eval_join, _check_join, doc="Join a list of strings (2013-05-23 to 2015-04-30)."
)
LIST_JOIN_MULTI = FunctionDef(
    "list_join", _eval_join_multi, _check_join_multi,
    doc="Join one or more lists; list and map items become JSON (2015-10-15+).",
)
FN_JOIN = FunctionDef("Fn::Join", _eval_join, _check_join, doc="CFN form of list_join.")


# --- str_split / Fn::Split -----------------------------------------------------------------

_SPLIT_SHAPE = "[delimiter, string] or [delimiter, string, index]"


def _index(value: Any) -> int:
    """Heat's ``int(index)``: numbers are truncated and numeric strings parsed."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(f"the index must be an integer, not {_show(value)}") from exc


def _split(delim: Any, text: str) -> list[str]:
    # Heat calls str.split(delim): a null delimiter therefore splits on whitespace.
    if delim is not None and not isinstance(delim, str):
        raise InvalidArgument("the delimiter must be a string")
    if delim == "":
        raise InvalidArgument("the delimiter must not be empty")
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
        report(ctx, call, "the delimiter must be a string")
    if delim == "":
        report(ctx, call, "the delimiter must not be empty")
    if not isinstance(text, (Call, str)) and text is not None:
        report(ctx, call, "the value to split must be a string")
    if len(args) > 2 and not isinstance(args[2], Call):
        try:
            _index(args[2])
        except InvalidArgument as exc:
            report(ctx, call, exc.message)


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
    except InvalidArgument as exc:
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
        report(ctx, call, "the delimiter must be a string")
    elif args[0] == "":
        report(ctx, call, "the delimiter must not be empty")
    if not isinstance(args[1], (Call, str)):
        report(ctx, call, "the value to split must be a string")


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
    except InvalidArgument as exc:
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
        raise InvalidArgument(f"algorithm must be one of {', '.join(sorted(ALGORITHMS))}")
    return algorithm


def _check_digest(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if isinstance(args, Call):
        return
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, _DIGEST_SHAPE)
        return
    if not all(isinstance(a, (Call, str)) for a in args):
        report(ctx, call, "arguments must be a list of strings")
        return
    if isinstance(args[0], str):
        try:
            _algorithm(args[0])
        except InvalidArgument as exc:
            report(ctx, call, exc.message)


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
    except InvalidArgument as exc:
        raise fail(call, exc.message) from exc
    except UnicodeEncodeError:
        raise fail(call, "the value must contain only Latin-1 characters") from None
    return hashlib.new(algorithm, data, usedforsecurity=False).hexdigest()


def _check_base64(call: Call, ctx: CheckContext) -> None:
    if not isinstance(call.args, (Call, str)):
        report(ctx, call, "the argument must be a string")


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
        report(ctx, call, "arguments must be a map")
        return
    for problem in _url_problems(call.args):
        report(ctx, call, problem)


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
