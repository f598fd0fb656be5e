"""The fast reader of plain block YAML answers exactly as the general loader, or not at all.

``convergence.template.plain_yaml.read_plain`` takes large machine-written templates a line at
a time; for anything it does not understand it answers None and ``load_document`` uses the
general (libyaml event) loader. Here both read the same documents: hand-written cases at the
edges of the subset, generated data dumped in several styles, and those documents mutated line
by line. Wherever the fast reader answers, the general loader must read the same data (same
types, same key order); wherever the general loader refuses a document, the fast one must not
answer.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convergence.template.errors import TemplateError
from convergence.template.plain_yaml import read_plain
from convergence.template.source import Limits, _load_yaml, load_document

LIMITS = Limits(max_bytes=10**8)


def general(text: str) -> Any:
    return _load_yaml(text, "t", LIMITS)


def same(text: str) -> Any:
    """The fast reader's answer, which must be the general loader's."""
    fast = read_plain(text, LIMITS.max_depth)
    assert fast is not None, "the fast reader should read this one"
    expected = general(text)
    assert fast == expected and repr(fast) == repr(expected)
    return fast


def declined(text: str) -> None:
    assert read_plain(text, LIMITS.max_depth) is None


def test_a_template_in_the_plain_subset() -> None:
    data = same(
        "heat_template_version: 2018-08-31\n"
        "description: a plain one  # with a comment\n"
        "parameters:\n"
        "  count: {type: number, default: 3}\n"
        "  name: {type: string, default: 'x y'}\n"
        "resources:\n"
        "  a:\n"
        "    type: OS::Heat::TestResource\n"
        "    properties:\n"
        "      value: {list_join: ['-', [{get_param: name}, v0]]}\n"
        "      list:\n"
        "      - 1\n"
        "      - two\n"
        "      - {three: [3, 3.5, yes, null, ~]}\n"
        "    depends_on: [b, c]\n"
        "  b:\n"
        "    type: OS::Heat::None\n"
        "    metadata:\n"
        "      - key: k\n"
        "        value: v\n"
        "      -\n"
        "        nested: true\n"
        "  c: {type: None}\n"
        "outputs:\n"
        "  url: {value: 'http://host:80/x'}\n"
        "  empty:\n")
    assert data["parameters"]["count"] == {"type": "number", "default": 3}
    assert data["resources"]["a"]["properties"]["list"][2] == {
        "three": [3, 3.5, True, None, None]}
    assert data["outputs"]["empty"] is None


@pytest.mark.parametrize("text", [
    "a: 0x1f\nb: 017\nc: 1_000\nd: 1:30\ne: .5\ng: +3\nh: 1e5\ni: 2016-10-14\n",
    "a: [0x1f, 017, 1_000, '1', .inf, 1.0, +0]\n",
    "a: {yes: no, on: off, 'on': 'off', ~: null, 1: 2}\n",
    "a: OS::Heat::None\nb: a:b\nc: a#b\nd: it's\ne: a,b]c\n",
    "a: 'it''s'\nb: \"double\"\nc: ''\n",
    "a:\n- x\n- y\nb:\n  - z\n",
    "- a\n- b: 1\n  c: 2\n-\n- [x]\n",
    "a: [ x ,  y ]\nb: {  }\nc: []\nd: [a b, c  d]\n",
    "a: b # comment\n# comment\n  # indented comment\nc: d\n",
    "  a: 1\n  b: 2\n",
])
def test_edges_read_alike(text: str) -> None:
    same(text)


@pytest.mark.parametrize("text", [
    "a: |\n  block\n",  # block scalars
    "a: >\n  folded\n",
    "a: &x 1\nb: *x\n",  # anchors and aliases
    "a: !!str 1\n",  # tags
    "a: plain\n  continued\n",  # a multi-line plain scalar
    "a: [1,\n  2]\n",  # a multi-line flow collection
    "a: \"esc\\n\"\n",  # escapes
    "---\na: 1\n",  # document markers
    "a: 1\n...\n",
    "a:\tb\n",  # tabs
    "<<: {a: 1}\n",  # merge keys
    "a: 1\na: 2\n",  # a key given twice
    "? a\n: b\n",  # complex keys
    "a: -1\n",  # a plain scalar starting with '-'
    "a: [1, 2,]\n",
    "a: {type: OS::Heat::None}\n",  # ":" in a flow scalar (libyaml's rule has changed)
    "a: {b}\n",
    "a: [b: c]\n",
    "k" * 1100 + ": v\n",  # a key libyaml finds too long
    "",
    "# only a comment\n",
])
def test_what_the_fast_reader_leaves_to_the_general_loader(text: str) -> None:
    declined(text)


def test_depth_is_left_to_the_general_loader_near_the_limit() -> None:
    text = "a: [[[1]]]\n"
    assert read_plain(text, 4) is None  # the general loader reads it, at the limit
    assert load_document(text, "t", Limits(max_depth=4)) == {"a": [[[1]]]}
    with pytest.raises(TemplateError, match="deeper than 3"):
        load_document(text, "t", Limits(max_depth=3))


_scalars = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
            | st.floats(allow_nan=False, allow_infinity=False, width=32)
            | st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                      max_size=8)
            | st.sampled_from(["yes", "No", "on", "~", "null", "1e5", "0x1f", "1:30", "a: b",
                               "a #b", "-x", "it's", "'q'", "[x]", "{x}", "a, b", "OS::X"]))
_data = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_scalars, inner, max_size=4),
    max_leaves=25)


def _mutations(text: str, rnd: random.Random) -> list[str]:
    lines = text.split("\n")
    out = []
    for _ in range(6):
        copy = list(lines)
        i = rnd.randrange(len(copy))
        choice = rnd.randrange(5)
        if choice == 0:
            copy[i] = " " + copy[i]
        elif choice == 1:
            copy[i] = copy[i].lstrip(" ")
        elif choice == 2:
            copy.insert(i, copy[rnd.randrange(len(copy))])
        elif choice == 3:
            j = rnd.randrange(len(copy[i]) + 1)
            copy[i] = copy[i][:j] + rnd.choice(":-#'\"[]{}, ?&*!|>") + copy[i][j:]
        else:
            del copy[i]
        out.append("\n".join(copy))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_data, st.sampled_from([False, None, True]), st.randoms(use_true_random=False))
def test_generated_documents_and_their_mutations(data: Any, flow: bool | None,
                                                 rnd: random.Random) -> None:
    text = yaml.safe_dump({"root": data}, default_flow_style=flow, allow_unicode=True,
                          width=10**6)
    for candidate in [text, *_mutations(text, rnd)]:
        fast = read_plain(candidate, LIMITS.max_depth)
        if fast is None:
            continue
        try:
            expected = general(candidate)
        except TemplateError as exc:  # pragma: no cover - a failure's report
            raise AssertionError(f"the fast reader read what libyaml refuses:\n{candidate}\n"
                                 f"{exc}") from None
        assert fast == expected and repr(fast) == repr(expected), candidate


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_lines_split_a_chunk_at_a_time_read_alike(chunk: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text = "".join(f"r{i}:\n  type: T\n  properties: {{v: [a{i}, 'b']}}\n  d:\n  - x\n"
                   for i in range(40))
    expected = same(text)
    monkeypatch.setattr("convergence.template.plain_yaml._CHUNK", chunk)
    assert read_plain(text, LIMITS.max_depth) == expected
