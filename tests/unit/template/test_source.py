"""Loading documents safely: syntax errors with line and column, bombs, depth, size."""

from __future__ import annotations

import time

import pytest
import yaml

from convergence.template import DEFAULT_LIMITS, Limits, TemplateError, load_document


def _error(text: str | bytes, limits: Limits = DEFAULT_LIMITS) -> str:
    with pytest.raises(TemplateError) as info:
        load_document(text, "template", limits)
    return str(info.value)


def test_scalars_follow_yaml_1_1_but_dates_stay_strings() -> None:
    data = load_document(
        "v: 2016-10-14\nf: 1.5\nb: yes\nn: ~\nh: 0x1f\nq: '1'\ns: !!str 5\ne: 1e5\n"
        "i: -7\no: off\nt: 2001-12-14t21:59:43.10-05:00\n", "t")
    assert data == {"v": "2016-10-14", "f": 1.5, "b": True, "n": None, "h": 31, "q": "1",
                    "s": "5", "e": "1e5", "i": -7, "o": False, "t": "2001-12-14t21:59:43.10-05:00"}


def test_same_data_as_pyyaml_for_block_and_flow_styles() -> None:
    text = """
a:
  - {x: 1, y: [a, b, "c"]}
  - |
    line one
    line two
  - >
    folded
    text
b: &anchor {k: v}
c: *anchor
d:
  <<: *anchor
  extra: 1
"""
    class Strings(yaml.SafeLoader):
        pass
    Strings.add_constructor("tag:yaml.org,2002:timestamp", Strings.construct_yaml_str)
    assert load_document(text, "t") == yaml.load(text, Loader=Strings)


def test_malformed_yaml_names_line_and_column() -> None:
    message = _error("a: 1\nb: [1, 2\nc: 3\n")
    assert "malformed YAML" in message and "line 3" in message and "column" in message


def test_malformed_json_names_line_and_column() -> None:
    message = _error('{"a": [1, 2,}\n')
    assert "malformed JSON" in message and "line 1, column 13" in message


def test_json_documents_are_read_as_json() -> None:
    assert load_document('{"heat_template_version": "2013-05-23"}', "t") == {
        "heat_template_version": "2013-05-23"}


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a: &a [x,x,x,x,x,x,x,x,x,x]"]
    for i in range(9):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    start = time.process_time()
    message = _error("\n".join(lines))
    assert "aliases" in message
    assert time.process_time() - start < 5  # bounded work; a real expansion takes hours


def test_recursive_anchor_is_refused() -> None:
    assert "recursive YAML anchor &a" in _error("a: &a [1, *a]\n")


def test_undefined_alias_is_refused() -> None:
    assert "undefined YAML alias" in _error("a: *nothing\n")


def test_deep_nesting_is_refused_without_crashing() -> None:
    deep = "[" * 200_000 + "]" * 200_000
    assert "nesting is deeper than 100 levels" in _error(deep, Limits(max_bytes=10**6))
    assert "nesting is deeper" in _error('{"a":' * 5000 + "1" + "}" * 5000,
                                         Limits(max_bytes=10**6))


def test_our_depth_limit_answers_before_the_parsers_own() -> None:
    # libyaml scans flow collections ahead and stops at 1,000 levels with its own words;
    # whatever the parser's version, the answer is the project's limit.
    for text in ("[" * 1500 + "]" * 1500, "a: " + "{b: " * 1500 + "1" + "}" * 1500):
        message = _error(text, Limits(max_bytes=10**6))
        assert "nesting is deeper than 100 levels" in message
        assert "malformed" not in message
    # A limit above the parser's: the parser's bound is the one that holds, said plainly.
    message = _error("[" * 1500 + "]" * 1500, Limits(max_bytes=10**6, max_depth=5000))
    assert "nesting is deeper than 1000 levels" in message


def test_depth_limit_is_configurable() -> None:
    assert load_document("a: [[[1]]]", "t", Limits(max_depth=4)) == {"a": [[[1]]]}
    assert "deeper than 3" in _error("a: [[[1]]]", Limits(max_depth=3))


def test_size_limit() -> None:
    big = "a: " + "x" * 2000
    assert "over the limit of 1000 bytes" in _error(big, Limits(max_bytes=1000))
    assert "over the limit" in _error(big.encode(), Limits(max_bytes=1000))


def test_invalid_utf8_is_refused() -> None:
    assert "not valid UTF-8" in _error(b"a: \xff\xfe")


def test_several_documents_are_refused() -> None:
    assert "single document" in _error("a: 1\n---\nb: 2\n")


def test_unsupported_tags_are_refused() -> None:
    assert "unsupported YAML tag" in _error("a: !!python/object:os.system ls\n")


def test_empty_document_is_none() -> None:
    assert load_document("", "t") is None


def test_equal_strings_of_a_json_document_are_one_object() -> None:
    # A large template names the same resources and attributes over and over: one string
    # each, not one per use (json.loads makes a new one for every value).
    text = ('{"heat_template_version": "2018-08-31", "resources": {"net": {"type": "T"}, '
            '"a": {"type": "T", "properties": {"n": {"get_resource": "net"}, '
            '"o": {"get_attr": ["net", "output"]}}}, "b": {"type": "T", "depends_on": ["net"], '
            '"properties": {"o": {"get_attr": ["net", "output"]}}}}}')
    doc = load_document(text, "t")
    resources = doc["resources"]
    name = next(k for k in resources if k == "net")
    uses = [resources["a"]["properties"]["n"]["get_resource"],
            resources["a"]["properties"]["o"]["get_attr"][0],
            resources["b"]["depends_on"][0], resources["b"]["properties"]["o"]["get_attr"][0]]
    assert all(u is name for u in uses)
    outputs = [resources[r]["properties"]["o"]["get_attr"][1] for r in ("a", "b")]
    assert outputs[0] is outputs[1] and outputs[0] == "output"
