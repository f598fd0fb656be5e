"""Resolving properties and outputs: lazy, local, with only the data of named resources."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from convergence.template import (
    StackIdentity,
    TemplateError,
    TemplateResolver,
    UnknownValue,
    parse_template,
)

from .conftest import hot

R = "OS::Heat::TestResource"


class Data:
    """Stored resource data; records which resources were read, to prove locality."""

    def __init__(self, refs: Mapping[str, Any], attrs: Mapping[str, Mapping[str, Any]]) -> None:
        self.refs, self.attrs = refs, attrs
        self.read: list[str] = []

    def reference_id(self, resource: str) -> Any:
        self.read.append(resource)
        if resource not in self.refs:
            raise UnknownValue(resource)
        return self.refs[resource]

    def attribute(self, resource: str, name: str) -> Any:
        self.read.append(resource)
        if resource not in self.attrs:
            raise UnknownValue(resource)
        return self.attrs[resource].get(name)

    def attributes(self, resource: str) -> Mapping[str, Any]:
        self.read.append(resource)
        return self.attrs[resource]


TEMPLATE = parse_template(hot(f"""
    parameters:
      env: {{type: string, default: dev}}
      nets: {{type: json, default: {{a: [10, 20]}}}}
    resources:
      a: {{type: {R}}}
      b: {{type: {R}}}
      c:
        type: {R}
        properties:
          value:
            str_replace:
              template: $env/$ref/$out
              params:
                $env: {{get_param: env}}
                $ref: {{get_resource: a}}
                $out: {{get_attr: [b, output, 1]}}
          update_replace_value: {{get_param: [nets, a, 1]}}
      d:
        type: {R}
        properties:
          value: {{list_join: [",", [{{get_param: OS::stack_name}}, {{get_param: OS::stack_id}}]]}}
    outputs:
      c_value: {{value: {{get_attr: [c, output]}}}}
      all_b: {{value: {{get_attr: [b]}}}}
    """))


def test_properties_resolve_from_direct_dependencies_only() -> None:
    data = Data({"a": "a-id"}, {"b": {"output": ["x", "y"]}})
    resolver = TemplateResolver(TEMPLATE, {"env": "prod", "nets": {"a": [10, 20]}}, data=data)
    assert resolver.properties("c") == {"value": "prod/a-id/y", "update_replace_value": 20}
    assert sorted(set(data.read)) == ["a", "b"]


def test_pseudo_parameters() -> None:
    resolver = TemplateResolver(TEMPLATE, {}, identity=StackIdentity("web", "id-1", "p"))
    assert resolver.properties("d") == {"value": "web,id-1"}


def test_unknown_until_the_dependency_exists() -> None:
    resolver = TemplateResolver(TEMPLATE, {"env": "x", "nets": {}}, data=Data({}, {}))
    with pytest.raises(UnknownValue):
        resolver.properties("c")


def test_outputs_resolve_and_unknown_ones_are_none() -> None:
    data = Data({}, {"b": {"output": "bee", "show": {}}})
    outputs = TemplateResolver(TEMPLATE, {}, data=data).outputs()
    assert outputs == {"c_value": None, "all_b": {"output": "bee", "show": {}}}


def test_wallaby_if_elides_items() -> None:
    t = parse_template(hot(f"""
        parameters:
          flag: {{type: boolean, default: false}}
        conditions:
          c: {{get_param: flag}}
        resources:
          a:
            type: {R}
            properties:
              value: {{if: [c, set]}}
              action_wait_secs:
                create: {{if: [c, 5]}}
                delete: 1
        """, "wallaby"))
    assert TemplateResolver(t, {"flag": False}).properties("a") == {
        "action_wait_secs": {"delete": 1}}
    assert TemplateResolver(t, {"flag": True}).properties("a") == {
        "value": "set", "action_wait_secs": {"create": 5, "delete": 1}}


def test_conditions_evaluate_with_inline_expressions() -> None:
    t = parse_template(hot(f"""
        parameters:
          env: {{type: string}}
        conditions:
          prod: {{equals: [{{get_param: env}}, prod]}}
          not_prod: {{not: prod}}
          both: {{and: [prod, {{not: not_prod}}]}}
        resources:
          a: {{type: {R}, condition: {{or: [prod, {{equals: [{{get_param: env}}, qa]}}]}}}}
        """))
    values = TemplateResolver(t, {"env": "qa"}).condition_values()
    assert values["prod"] is False and values["not_prod"] is True and values["both"] is False
    assert list(values.values()).count(True) == 2  # not_prod and the inline one
    assert all(v is None for v in TemplateResolver(t, {}).condition_values().values())


def test_get_file_reads_only_the_files_map() -> None:
    t = parse_template(hot(f"resources:\n  a: {{type: {R}, properties: {{value: "
                           "{get_file: boot.sh}}}\n"), files={"boot.sh": "#!/bin/sh\n"})
    assert TemplateResolver(t, {}).properties("a") == {"value": "#!/bin/sh\n"}


def test_using_a_disabled_resource_is_an_error_at_resolution() -> None:
    t = parse_template(hot(f"""
        conditions: {{never: false}}
        resources:
          a: {{type: {R}, condition: never}}
          b: {{type: {R}, properties: {{value: {{get_resource: a}}}}}}
        """))
    with pytest.raises(TemplateError, match="resource 'a' does not exist"):
        TemplateResolver(t, {}, data=Data({"a": "x"}, {})).properties("b")


def test_cfn_ref_resolves_parameters_and_resources() -> None:
    t = parse_template(hot(f"""
        parameters:
          p: {{type: string, default: pv}}
        resources:
          a: {{type: {R}}}
          b: {{type: {R}, properties: {{value: {{"Fn::Join": ["-", [{{Ref: p}}, {{Ref: a}}]]}}}}}}
        """, "2013-05-23"))
    assert TemplateResolver(t, {"p": "pv"}, data=Data({"a": "aid"}, {})).properties("b") == {
        "value": "pv-aid"}
