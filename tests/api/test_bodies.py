"""Request bodies parsed with a bound on nesting (``convergence.api.bodies``): the measure
agrees with the parser, stays linear on adversarial input, and lets through what templates
may hold."""

from __future__ import annotations

import json

import pytest

from convergence.api.bodies import nesting_depth, parse_json
from convergence.api.errors import ApiError
from convergence.template import DEFAULT_LIMITS


def test_nesting_depth_is_measured_outside_strings() -> None:
    assert nesting_depth('{"a": "[[[{{{", "b": [[1]]}') == 3
    assert nesting_depth('"just a string"') == 0
    assert nesting_depth('{"a": "\\"[[[", "b": []}') == 2  # an escaped quote ends nothing
    assert nesting_depth('{"a": "unterminated [[[[') == 1  # the parser stops at the string
    assert nesting_depth("[" * 100_000) == 100_000


def test_a_body_may_nest_as_deep_as_a_template_inside_its_top_level() -> None:
    limit = DEFAULT_LIMITS.max_depth
    inside = "[" * limit + "]" * limit
    assert parse_json(f'{{"v": {inside}}}'.encode()) == {"v": json.loads(inside)}
    with pytest.raises(ApiError) as refused:
        parse_json(f'{{"v": [{inside}]}}'.encode())
    assert refused.value.code == 400
    assert f"deeper than {limit} levels" in refused.value.message


def test_body_parsing_does_not_recurse_on_adversarial_strings() -> None:
    # A naive string pattern scans the first three in time quadratic in their length; the
    # parser recurses on the last.
    for body in (b'"' + b'\\"' * 200_000, b'"' + b'\\"' * 200_000 + b"\\", b'"' * 400_000,
                 b'{"a": ' + b"[" * 50_000):
        with pytest.raises(ApiError) as refused:
            parse_json(body)
        assert refused.value.code == 400
