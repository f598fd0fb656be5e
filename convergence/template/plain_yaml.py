"""YAML scalars as YAML 1.1 resolves them, and a fast reader for the plain block subset of YAML.

Called by ``convergence.template.source``, whose :func:`load_document` tries :func:`read_plain`
first and falls back to its general loader (libyaml's event stream) when it answers None.

Large templates are machine-written in a small part of YAML: block mappings and sequences,
plain and single-line quoted scalars, one-line flow collections (``{get_attr: [r1, name]}``)
and comments. Reading libyaml's events costs three Python objects per event; this reader takes
a line at a time with one regular expression and builds the data directly, several times
faster. It answers only for documents it understands completely, and gives up (None) on
anything else: tabs, anchors, aliases, tags, block scalars (``|``, ``>``), multi-line plain,
quoted or flow scalars, escapes in double quotes, document markers, complex or merge keys,
control characters, and any indentation or token it does not expect. What it answers is
exactly what the general loader builds (``tests/unit/template/test_plain_yaml.py`` compares
them); errors, and their lines and columns, are always the general loader's.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

# Scalars ------------------------------------------------------------------------------------

BOOLEANS = {
    "yes": True, "Yes": True, "YES": True, "true": True, "True": True, "TRUE": True,
    "on": True, "On": True, "ON": True,
    "no": False, "No": False, "NO": False, "false": False, "False": False, "FALSE": False,
    "off": False, "Off": False, "OFF": False,
}  # fmt: skip
_NULL = {"", "~", "null", "Null", "NULL"}
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9_]*)\Z")
_INT_OTHER = re.compile(
    r"[-+]?(?:0b[0-1_]+|0[0-7_]+|0x[0-9a-fA-F_]+|[1-9][0-9_]*(?::[0-5]?[0-9])+)\Z")
_FLOAT = re.compile(
    r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?\Z"
    r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?\Z"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*\Z"
    r"|[-+]?\.(?:inf|Inf|INF)\Z|\.(?:nan|NaN|NAN)\Z"
)
_NUMERIC_START = frozenset("0123456789+-.")


def plain_scalar(text: str) -> Any:
    """Resolve an untagged plain scalar the way YAML 1.1 (PyYAML) does, timestamps excepted."""
    if not text or text in _NULL:
        return None
    first = text[0]
    if first in _NUMERIC_START:
        if _INT.match(text):
            return int(text.replace("_", ""))
        if _FLOAT.match(text):
            return to_float(text)
        if _INT_OTHER.match(text):
            return _to_int_other(text)
        return text
    value = BOOLEANS.get(text)
    if value is not None:
        return value
    return text


def _construct(tag: str, text: str) -> Any:
    """The rare scalar forms (sexagesimal, octal, .inf) through PyYAML's own constructor."""
    loader = yaml.SafeLoader("")
    try:
        node = yaml.ScalarNode(f"tag:yaml.org,2002:{tag}", text)
        return loader.construct_yaml_float(node) if tag == "float" else \
            loader.construct_yaml_int(node)
    finally:
        loader.dispose()


def to_float(text: str) -> float:
    return float(_construct("float", text))


def _to_int_other(text: str) -> int:
    return int(_construct("int", text))


# The plain block subset ---------------------------------------------------------------------

class _NotPlain(Exception):
    """The document uses something this reader leaves to the general loader."""


# A plain scalar may not start with an indicator ("-" may, before a character that is not
# blank, but such scalars are left to the general loader, as are those starting with "<", for
# "<<"). In a block, ": " and " #" end a plain scalar; a ":" before anything else is part of
# it; a word after a space may not start with ":" (left to the general loader, as rare).
# Quantifiers are possessive: nothing here needs to backtrack, and not trying is faster.
_START = r"[^\s\-?:,\[\]{}#&*!|>'\"%@`<]"
_WORD = r"[^\s:]*+(?::++[^\s:]++)*+"
_PLAIN_B = _START + _WORD + r"(?: ++[^\s:#]" + _WORD + r")*+"
# In a flow collection, flow indicators end it too; ":" is left out altogether.
_PLAIN_F = _START + r"[^\s:,\[\]{}]*+(?: ++[^\s:,\[\]{}#][^\s:,\[\]{}]*+)*+"
_SQ = r"'(?:[^']|'')*+'"
_DQ = r'"[^"\\]*+"'
_TAIL = r" *+(?:(?<![^ \n])#.*)?+"

# One line: indentation, a sequence entry's dash (with the spaces after it), a key, then a
# scalar or a flow collection; or, in the last group, a line of any other form.
_ROWS = re.compile(
    rf"^( *+)(-(?: ++|$))?+(?:({_PLAIN_B}):(?: ++|$))?+"
    rf"(?:({_PLAIN_B}|{_SQ}|{_DQ})|([\[{{].*))?+{_TAIL}$|^(.+)$",
    re.MULTILINE)
_FLOW_TOKEN = re.compile(rf" *(?:([\[\]{{}},])|(: )|({_SQ}|{_DQ}|{_PLAIN_F}))")
_FLOW_END = re.compile(_TAIL + r"\Z")
# Characters libyaml refuses or reads as line breaks, tabs (whose rules this reader does not
# follow), and byte order marks past the start.
_UNSUPPORTED = re.compile(
    "[^\n\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")

# Flow collections are read together, as one JSON document (see :func:`_flows_as_json`), when
# nothing in them needs YAML's rules: no double quotes, escapes, comments, anchors, tags, "?",
# "<<", ":" but as ": ", "- "; single quotes only around a whole scalar; and no plain scalar
# that YAML reads as something else than a string (a number, a boolean, null).
_FLOW_NOT_JSON = re.compile(
    r"[\"\\#&*!|>%@`?<]|:(?! )|-(?: |$)|'(?<=[^\[{, ]')(?![\]}, :]|$)"
    r"|(?:[\[{,]|: ) *+(?:[-+.0-9~]|(?:[yY]es|YES|[nN]o|NO|[tT]rue|TRUE|[fF]alse|FALSE"
    r"|[oO]n|ON|[oO]ff|OFF|[nN]ull|NULL) *+(?:[\]},]|: ))", re.MULTILINE)
_FLOW_SPLIT = re.compile(r" *+('[^'\"\\]*+'|[\[\]{},]|: ) *+")
# The same, once quoted: a second look at what goes to JSON.
_NOT_A_STRING = re.compile(
    r'"(?:[-+.0-9~]|(?:[yY]es|YES|[nN]o|NO|[tT]rue|TRUE|[fF]alse|FALSE|[oO]n|ON|[oO]ff|OFF'
    r'|[nN]ull|NULL)")')

# libyaml refuses a key longer than 1,024 characters ("could not find expected ':'").
_KEY_LENGTH = 1000
_CHUNK = 1 << 20  # characters of lines split at a time
_FLOW_BATCH = 10_000  # flow collections read as one JSON document
_CACHED = 4096  # scalars remembered per document: keys and common values, resolved once each
_MISSING = object()


class _Reader:
    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.scalars: dict[str, Any] = {}

    def scalar(self, token: str) -> Any:
        """A scalar token: plain (resolved) or quoted (a string)."""
        first = token[0]
        if first == "'":
            value: Any = token[1:-1].replace("''", "'")
        elif first == '"':
            value = token[1:-1]
        else:
            value = plain_scalar(token)
        if len(self.scalars) < _CACHED:
            self.scalars[token] = value
        return value

    def flow(self, text: str, depth: int) -> Any:
        """One flow collection, token by token."""
        value, pos = self._flow_node(text, 0, depth)
        if _FLOW_END.match(text, pos) is None:
            raise _NotPlain
        return value

    def _flow_node(self, text: str, pos: int, depth: int) -> tuple[Any, int]:
        m = _FLOW_TOKEN.match(text, pos)
        if m is None or m.lastindex == 2:
            raise _NotPlain
        pos = m.end()
        if m.lastindex == 3:
            token = m.group(3)
            found = self.scalars.get(token, _MISSING)
            return (self.scalar(token) if found is _MISSING else found), pos
        opener = m.group(1)
        if depth + 1 >= self.max_depth or opener not in "[{":
            raise _NotPlain
        closer = "]" if opener == "[" else "}"
        m = _FLOW_TOKEN.match(text, pos)
        if m is not None and m.group(1) == closer:
            return ([] if opener == "[" else {}), m.end()
        items: Any = [] if opener == "[" else {}
        while True:
            if opener == "[":
                value, pos = self._flow_node(text, pos, depth + 1)
                items.append(value)
            else:
                m = _FLOW_TOKEN.match(text, pos)
                if m is None or m.lastindex != 3:
                    raise _NotPlain
                key = self.scalar(m.group(3))
                m = _FLOW_TOKEN.match(text, m.end())
                if m is None or m.lastindex != 2:
                    raise _NotPlain
                items[key], pos = self._flow_node(text, m.end(), depth + 1)
            m = _FLOW_TOKEN.match(text, pos)
            if m is None or m.lastindex != 1:
                raise _NotPlain
            pos = m.end()
            sep = m.group(1)
            if sep == closer:
                return items, pos
            if sep != ",":
                raise _NotPlain

    def flows(self, texts: list[str], depths: list[int]) -> list[Any]:
        """The values of the document's flow collections, in order."""
        if max(map(len, texts)) > _KEY_LENGTH:
            raise _NotPlain  # a key in it might be too long for libyaml: its answer, then
        slow: set[int] = set()
        # A collection nested n deep takes 2n characters at least.
        if max(depths) + max(map(len, texts)) // 2 >= self.max_depth:
            slow.update(i for i, (text, depth) in enumerate(zip(texts, depths, strict=True))
                        if depth + len(text) // 2 >= self.max_depth)
        joined = "\n".join(texts)
        if _FLOW_NOT_JSON.search(joined):
            starts = list(itertools.accumulate((len(t) + 1 for t in texts), initial=0))
            slow.update(bisect.bisect_right(starts, m.start()) - 1
                        for m in _FLOW_NOT_JSON.finditer(joined))
        fast = [i for i in range(len(texts)) if i not in slow]
        values: list[Any] = [None] * len(texts)
        # In batches: the pieces a batch is cut into outweigh the values it gives.
        for start in range(0, len(fast), _FLOW_BATCH):
            batch = fast[start:start + _FLOW_BATCH]
            read = _flows_as_json([texts[i] for i in batch])
            if read is None:  # some need YAML's rules: each on its own
                for i in batch:
                    one = _flows_as_json([texts[i]])
                    if one is None:
                        slow.add(i)
                    else:
                        values[i] = one[0]
            else:
                for i, value in zip(batch, read, strict=True):
                    values[i] = value
        for i in slow:
            values[i] = self.flow(texts[i], depths[i])
        return values

    def read(self, text: str) -> Any:
        rows = itertools.chain.from_iterable(_rows(text))
        max_depth = self.max_depth
        cache = self.scalars
        scalar = self.scalar
        # The collection lines go into (innermost), its column, and whether it is a sequence
        # written at its mapping's column; the ones around it, outermost first.
        top: Any = None
        top_col = -1
        indentless = False
        outer: list[tuple[Any, int, bool]] = []
        # A key or entry whose value is on the lines below: its collection, key or index,
        # and the collection's column; ``pending_map``: that collection is a mapping.
        pending: Any = None
        pending_slot: Any = None
        pending_col = 0
        pending_map = False
        deepest = 1 << 30  # the next line may not be deeper (a scalar ended the last one)
        flow_texts: list[str] = []
        flow_depths: list[int] = []
        flow_slots: list[tuple[Any, Any]] = []
        for indent, dash, key, value, flow, other in rows:
            if other:
                raise _NotPlain
            if not (key or value or flow or dash):
                continue  # blank, or a comment
            col = len(indent)
            if col > deepest:
                raise _NotPlain  # a multi-line scalar, or a line where none may be
            deepest = 1 << 30
            if pending is not None:
                if col > pending_col or (col == pending_col and pending_map and dash):
                    new: Any = [] if dash else {}
                    pending[pending_slot] = new
                    outer.append((top, top_col, indentless))
                    top, top_col, indentless = new, col, col == pending_col
                    if len(outer) >= max_depth:
                        raise _NotPlain
                pending = None
            elif top is None:
                top, top_col = ([] if dash else {}), col
                outer.append((top, -1, False))  # the document itself, never left
            while col < top_col or (indentless and col == top_col and not dash):
                top, top_col, indentless = outer.pop()
            if col != top_col:
                raise _NotPlain
            if dash:
                if type(top) is not list:
                    raise _NotPlain
                if not key:
                    deepest = col
                    if flow:
                        top.append(None)
                        flow_texts.append(flow)
                        flow_depths.append(len(outer))
                        flow_slots.append((top, len(top) - 1))
                    elif value:
                        found = cache.get(value, _MISSING)
                        top.append(scalar(value) if found is _MISSING else found)
                    else:
                        top.append(None)
                        pending, pending_slot, pending_col, pending_map = \
                            top, len(top) - 1, col, False
                        deepest = 1 << 30
                    continue
                # "- key: ...": a mapping that begins on the entry's line.
                item: dict[Any, Any] = {}
                top.append(item)
                outer.append((top, top_col, indentless))
                top, top_col, indentless = item, col + len(dash), False
                if len(outer) >= max_depth:
                    raise _NotPlain
            elif type(top) is not dict or not key:
                raise _NotPlain
            k = cache.get(key, _MISSING)
            if k is _MISSING:
                if len(key) > _KEY_LENGTH:
                    raise _NotPlain
                k = scalar(key)
            if k in top:
                raise _NotPlain  # a key given twice: the general loader's to settle
            if flow:
                top[k] = None
                flow_texts.append(flow)
                flow_depths.append(len(outer))
                flow_slots.append((top, k))
                deepest = top_col
                if len(flow_texts) >= _FLOW_BATCH:
                    self.fill(flow_slots, self.flows(flow_texts, flow_depths))
                    flow_texts, flow_depths, flow_slots = [], [], []
            elif value:
                found = cache.get(value, _MISSING)
                top[k] = scalar(value) if found is _MISSING else found
                deepest = top_col
            else:
                top[k] = None
                pending, pending_slot, pending_col, pending_map = top, k, top_col, True
        if flow_texts:
            self.fill(flow_slots, self.flows(flow_texts, flow_depths))
        return outer[0][0] if outer else None

    @staticmethod
    def fill(slots: list[tuple[Any, Any]], values: list[Any]) -> None:
        """Put the values of flow collections where they were written."""
        for (holder, slot), value in zip(slots, values, strict=True):
            holder[slot] = value


def _rows(text: str) -> Iterator[list[tuple[str, ...]]]:
    """The lines of a document as ``_ROWS`` splits them, a chunk of lines at a time (all at
    once, the tuples of a million-resource template would weigh more than its data)."""
    pos, size = 0, len(text)
    while pos <= size:
        end = text.find("\n", pos + _CHUNK)
        end = size if end < 0 else end
        chunk = text[pos:end]
        rows = _ROWS.findall(chunk)
        if len(rows) != chunk.count("\n") + 1:
            raise _NotPlain  # pragma: no cover - every line matches one of the alternatives
        yield rows
        pos = end + 1


def _flows_as_json(texts: list[str]) -> list[Any] | None:
    """Flow collections read as one JSON document: each scalar between two delimiters is
    put in double quotes (single-quoted ones get theirs), so that plain scalars become the
    strings they are. None if the result is not JSON (the token reader decides then)."""
    parts = _FLOW_SPLIT.split("[" + ",".join(texts) + "]")
    # parts alternate text between delimiters (a scalar, or nothing) and delimiters: joined
    # with double quotes, each scalar is quoted and each empty one leaves "" behind.
    document = '"'.join(parts)[1:-1].replace('""', "")
    if _NOT_A_STRING.search(document):
        return None
    try:
        values = json.loads(document.replace("'", '"'))
    except ValueError:
        return None
    if not isinstance(values, list) or len(values) != len(texts):
        return None
    return values


def read_plain(text: str, max_depth: int) -> Any:
    """The data of a YAML document in the plain block subset; None for any other document
    (then the general loader reads it: this reader never refuses anything itself)."""
    if _UNSUPPORTED.search(text) or text.startswith(("---", "...")) or "\n---" in text \
            or "\n..." in text:
        return None  # besides the characters: document markers (and lines that look like them)
    try:
        return _Reader(max_depth).read(text)
    except (_NotPlain, IndexError, RecursionError):
        return None
