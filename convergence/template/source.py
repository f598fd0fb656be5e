"""Turning the text of a template or environment into plain data, safely.

Used by the template and environment loaders. Refuses, with the line and column where it can:
malformed YAML or JSON, documents over the size limit, nesting deeper than the depth limit, and
YAML alias bombs and recursive anchors.

YAML in the plain block subset large templates are written in is read by
:mod:`convergence.template.plain_yaml`, several times faster; any other YAML (and any YAML that
is refused: errors always come from here) is read from libyaml's event stream and built here
without recursion, for three reasons:
libyaml's composer recurses in C and crashes the process on a deep enough document; counting
the expanded size of aliases while building stops a billion-laughs document after a bounded
amount of work; and resolving plain scalars with a table is several times faster than PyYAML's
constructor. Scalars follow YAML 1.1 as PyYAML's safe loader does, except that timestamps stay
strings, as in Heat (``heat_template_version: 2016-10-14`` is a string).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from convergence.template.collector import collector_paused
from convergence.template.errors import SYNTAX, TemplateError
from convergence.template.plain_yaml import BOOLEANS, plain_scalar, read_plain, to_float

try:  # libyaml's parser; the pure-Python one behaves the same, only slower.
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a single document may cost to read."""

    max_bytes: int = 1024 * 1024
    max_depth: int = 100
    # Nodes that aliases stand for, counted at each use; beyond this a document is a bomb.
    max_expanded_nodes: int = 1_000_000
    # How many levels of nested templates (template resources) may lie below this one.
    max_nesting: int = 5


DEFAULT_LIMITS = Limits()

_TAGGED: dict[str, Callable[[str], Any]] = {
    "tag:yaml.org,2002:str": str,
    "tag:yaml.org,2002:int": lambda s: int(plain_scalar(s)),
    "tag:yaml.org,2002:float": lambda s: float(plain_scalar(s) if s[:1] != "." else to_float(s)),
    "tag:yaml.org,2002:bool": lambda s: bool(BOOLEANS.get(s, False)),
    "tag:yaml.org,2002:null": lambda s: None,
    "tag:yaml.org,2002:timestamp": str,
    "!": str,
}


# libyaml's own bound on nesting, and the words of its error (PyYAML's pure-Python parser
# has no such bound).
_PARSER_MAX_DEPTH = 1000
_PARSER_DEPTH_PROBLEM = "maximum nesting depth"


def _too_deep(depth: int) -> str:
    return f"nesting is deeper than {depth} levels"


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _fail(what: str, message: str, mark: Any = None) -> TemplateError:
    where = _where(mark)
    return TemplateError.at(what, f"{message} ({where})" if where else message, SYNTAX)


class _Open:
    """A collection being built: its value, its expanded size so far, its pending key."""

    __slots__ = ("anchor", "key", "merge", "pending_key", "size", "value")

    def __init__(self, value: Any, anchor: str | None) -> None:
        self.value = value
        self.anchor = anchor
        self.size = 1
        self.key: Any = None
        self.pending_key = False  # for mappings: next value completes a key/value pair
        self.merge: list[dict[Any, Any]] | None = None


def _load_yaml(text: str, what: str, limits: Limits) -> Any:
    anchors: dict[str, tuple[Any, int]] = {}
    open_anchors: set[str] = set()
    stack: list[_Open] = []
    root: Any = None
    have_root = False
    expanded = 0

    def attach(value: Any, size: int, mark: Any, aliased: bool = False) -> None:
        nonlocal root, have_root, expanded
        if aliased:
            # What an alias stands for counts again each time it is used: that is how a
            # billion-laughs document grows, and where it is stopped.
            expanded += size
            if expanded > limits.max_expanded_nodes:
                raise _fail(what, "the document expands to too many nodes through YAML "
                            f"aliases (over {limits.max_expanded_nodes}); refusing it", mark)
        if not stack:
            root, have_root = value, True
            return
        top = stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
        elif not top.pending_key:
            try:
                hash(value)
            except TypeError:
                raise _fail(what, "a mapping key must be a scalar", mark) from None
            top.key, top.pending_key = value, True
        else:
            top.pending_key = False
            if top.key == "<<" and isinstance(value, dict | list):
                merges = value if isinstance(value, list) else [value]
                top.merge = (top.merge or []) + [m for m in merges if isinstance(m, dict)]
            else:
                top.value[top.key] = value

    parser = _Loader(text)
    try:
        while True:
            event: Any = parser.get_event()
            if event is None:
                break
            cls = type(event)
            if cls is yaml.ScalarEvent:
                if event.tag is None or event.tag == "?":
                    # libyaml marks plain scalars with style '' (PyYAML's parser with None).
                    value = plain_scalar(event.value) if event.implicit[0] and not event.style \
                        else event.value
                else:
                    convert = _TAGGED.get(event.tag)
                    if convert is None:
                        raise _fail(what, f"unsupported YAML tag {event.tag!r}", event.start_mark)
                    try:
                        value = convert(event.value)
                    except (TypeError, ValueError):
                        raise _fail(what, f"{event.value!r} is not a valid {event.tag}",
                                    event.start_mark) from None
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1)
                attach(value, 1, event.start_mark)
            elif cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
                if len(stack) >= limits.max_depth:
                    raise _fail(what, _too_deep(limits.max_depth), event.start_mark)
                if event.tag not in (None, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"):
                    raise _fail(what, f"unsupported YAML tag {event.tag!r}", event.start_mark)
                stack.append(_Open({} if cls is yaml.MappingStartEvent else [], event.anchor))
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
            elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
                done = stack.pop()
                if done.merge:
                    merged: dict[Any, Any] = {}
                    for m in reversed(done.merge):
                        merged.update(m)
                    merged.update(done.value)
                    done.value.clear()
                    done.value.update(merged)
                if done.anchor is not None:
                    open_anchors.discard(done.anchor)
                    anchors[done.anchor] = (done.value, done.size)
                attach(done.value, done.size, event.start_mark)
            elif cls is yaml.AliasEvent:
                if event.anchor in open_anchors:
                    raise _fail(what, f"recursive YAML anchor &{event.anchor}", event.start_mark)
                found = anchors.get(event.anchor)
                if found is None:
                    raise _fail(what, f"undefined YAML alias *{event.anchor}", event.start_mark)
                attach(found[0], found[1], event.start_mark, aliased=True)
            elif cls is yaml.DocumentStartEvent and have_root:
                raise _fail(what, "expected a single document, found several", event.start_mark)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        if _PARSER_DEPTH_PROBLEM in problem:
            # libyaml (0.2.5 and later) stops nesting at its own limit while scanning ahead,
            # before our count sees the events; the document is then deeper than ours too.
            raise _fail(what, _too_deep(min(limits.max_depth, _PARSER_MAX_DEPTH)), mark) \
                from None
        raise _fail(what, f"malformed YAML: {problem}", mark) from None
    except yaml.YAMLError as exc:
        raise _fail(what, f"malformed YAML: {exc}") from None
    finally:
        parser.dispose()
    return root


_CONTAINERS = (dict, list)  # a tuple: isinstance takes it faster than a union


def _settle_json(data: Any, what: str, limits: Limits) -> None:
    """Refuse JSON nested deeper than the limit, a level at a time, the containers only; and
    make equal string values one object. JSON gives every value a string of its own (keys
    are shared), and a template names the same resources, attributes and parameters over
    and over: a tenth of a large template's memory. The names of the resources are the
    strings other values name most."""
    level = [data] if isinstance(data, _CONTAINERS) else []
    resources = data.get("resources") if isinstance(data, dict) else None
    seen: dict[str, str] = {name: name for name in resources if isinstance(name, str)} \
        if isinstance(resources, dict) else {}
    share = seen.setdefault
    depth = 0
    while level:
        if depth >= limits.max_depth:
            raise _fail(what, _too_deep(limits.max_depth))
        values: list[Any] = []
        for container in level:
            if isinstance(container, dict):
                for key, value in container.items():  # (a value replaced: same keys)
                    if type(value) is str:
                        container[key] = share(value, value)
                    elif isinstance(value, _CONTAINERS):
                        values.append(value)
            else:
                for i, value in enumerate(container):
                    if type(value) is str:
                        container[i] = share(value, value)
                    elif isinstance(value, _CONTAINERS):
                        values.append(value)
        level = values
        depth += 1


def load_document(source: str | bytes, what: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse one YAML or JSON document (JSON when it starts with ``{``, as Heat decides)."""
    return load_tree(source, what, limits)[0]


@collector_paused()
def load_tree(source: str | bytes, what: str,
              limits: Limits = DEFAULT_LIMITS) -> tuple[Any, bool]:
    """:func:`load_document`, and whether the document is a tree: every map and list in it
    in one place only, as JSON and the plain YAML reader build them (a YAML alias makes the
    node it names stand in several places). A tree's owner may change it in place."""
    size = len(source)
    if isinstance(source, bytes):
        if size > limits.max_bytes:
            raise _too_big(what, size, limits)
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(what, f"not valid UTF-8 text (byte {exc.start})") from None
    elif size > limits.max_bytes and len(source.encode("utf-8")) > limits.max_bytes:
        raise _too_big(what, len(source.encode("utf-8")), limits)
    if source.startswith("\ufeff"):
        source = source[1:]
    if source.lstrip().startswith("{"):
        try:
            data = json.loads(source)
        except RecursionError:
            raise _fail(what, _too_deep(limits.max_depth)) from None
        except json.JSONDecodeError as exc:
            raise _fail(what, f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                        ) from None
        _settle_json(data, what, limits)
        return data, True
    data = read_plain(source, limits.max_depth)
    return (data, True) if data is not None else (_load_yaml(source, what, limits), False)


def _too_big(what: str, size: int, limits: Limits) -> TemplateError:
    return _fail(what, f"the document is {size} bytes, over the limit of {limits.max_bytes} bytes")
