"""Whether a resource is defined alike in two templates (what lets an update leave it alone),
and what the parser does to the document it reads: a template read from text keeps no copy
of it, and one given as data is never changed.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from convergence.template import parse_template, validate_stack
from convergence.template.changes import same_resource
from convergence.template.functions.base import Call
from convergence.template.validate import StackDefinition

from .conftest import CATALOG, hot

R = "OS::Heat::TestResource"


def defined(body: str, **kwargs: Any) -> StackDefinition:
    return validate_stack(hot(body), catalog=CATALOG, **kwargs)


TWO = f"""\
parameters:
  p: {{type: string}}
conditions:
  on: {{equals: [{{get_param: p}}, 'yes']}}
resources:
  a: {{type: {R}, properties: {{value: x}}}}
  b:
    type: {R}
    depends_on: a
    properties: {{value: {{get_param: p}}}}
  c:
    type: {R}
    condition: on
    properties: {{value: {{get_file: f.txt}}}}
"""


def test_the_same_text_is_the_same_resource() -> None:
    old = defined(TWO, parameters={"p": "no"}, files={"f.txt": "1"})
    new = defined(TWO, parameters={"p": "no"}, files={"f.txt": "1"})
    assert all(same_resource(old, new, name) for name in ("a", "b", "c"))


def test_a_changed_property_is_a_changed_resource_and_only_that() -> None:
    old = defined(TWO, parameters={"p": "no"}, files={"f.txt": "1"})
    new = defined(TWO.replace("value: x", "value: y"), parameters={"p": "no"},
                  files={"f.txt": "1"})
    assert not same_resource(old, new, "a")
    assert same_resource(old, new, "b") and same_resource(old, new, "c")


def test_what_a_resource_reads_besides_its_snippet_counts() -> None:
    old = defined(TWO, parameters={"p": "no"}, files={"f.txt": "1"})
    param = defined(TWO, parameters={"p": "yes"}, files={"f.txt": "1"})
    # b reads the parameter; c's condition does (so do the conditions); a reads neither.
    assert [same_resource(old, param, n) for n in ("a", "b", "c")] == [True, False, False]
    file = defined(TWO, parameters={"p": "no"}, files={"f.txt": "2"})
    assert [same_resource(old, file, n) for n in ("a", "b", "c")] == [True, True, False]


def test_spellings_that_mean_the_same_are_the_same_resource() -> None:
    old = defined(TWO, parameters={"p": "no"}, files={"f.txt": "1"})
    new = defined(TWO.replace("depends_on: a", "depends_on: [a]\n    deletion_policy: Delete"),
                  parameters={"p": "no"}, files={"f.txt": "1"})
    assert same_resource(old, new, "b")
    kept = defined(TWO.replace("depends_on: a", "depends_on: a\n    deletion_policy: Retain"),
                   parameters={"p": "no"}, files={"f.txt": "1"})
    assert not same_resource(old, kept, "b")


ALIASED = f"""\
resources:
  a: {{type: {R}}}
  b:
    type: {R}
    properties: &shared
      value: {{get_attr: [a, output]}}
  c:
    type: {R}
    properties: *shared
"""


def test_a_node_two_resources_share_through_an_alias_counts_for_both() -> None:
    # libyaml makes one map of the two; the parser must not put b's calls into it in place.
    definition = defined(ALIASED)
    assert definition.dependencies["b"] == definition.dependencies["c"] == frozenset({"a"})
    for name in ("b", "c"):
        value = definition.template.resources[name].properties["value"]
        assert isinstance(value, Call) and value.path[:2] == ("resources", name)


def test_a_document_given_as_data_is_never_changed() -> None:
    data = json.loads(json.dumps({
        "heat_template_version": "2018-08-31",
        "resources": {"a": {"type": R},
                      "b": {"type": R, "properties": {"value": {"get_attr": ["a", "output"]},
                                                      "list": [{"get_resource": "a"}]}}}}))
    before = copy.deepcopy(data)
    template = parse_template(data)
    assert data == before
    assert isinstance(template.resources["b"].properties["value"], Call)
    assert isinstance(template.resources["b"].properties["list"][0], Call)


def test_a_document_read_from_text_has_its_calls_in_place() -> None:
    for text in (hot(f"resources:\n  a: {{type: {R}}}\n  b:\n    type: {R}\n    properties:\n"
                     "      value: {get_attr: [a, output]}\n      list: [{get_resource: a}]\n"),
                 json.dumps({"heat_template_version": "2018-08-31", "resources": {
                     "a": {"type": R}, "b": {"type": R, "properties": {
                         "value": {"get_attr": ["a", "output"]},
                         "list": [{"get_resource": "a"}]}}}})):
        properties = parse_template(text).resources["b"].properties
        assert isinstance(properties["value"], Call)
        assert isinstance(properties["list"][0], Call)
        assert properties["list"][0].args == "a"
