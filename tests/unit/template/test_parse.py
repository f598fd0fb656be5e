"""Parsing a template: every kind of document-level error, each with its path, all at once."""

from __future__ import annotations

import pytest

from convergence.template import VERSIONS, parse_template
from convergence.template.functions.base import Call

from .conftest import hot, parse_problems

R = "OS::Heat::TestResource"


@pytest.mark.parametrize("version", [v.name for v in VERSIONS] +
                         [v.alias for v in VERSIONS if v.alias])
def test_every_version_and_alias_parses(version: str) -> None:
    t = parse_template(hot(f"resources:\n  a: {{type: {R}}}\n", version))
    assert t.version.name in {v.name for v in VERSIONS}
    assert list(t.resources) == ["a"]


def test_unknown_version_lists_the_known_ones() -> None:
    [p] = parse_problems("heat_template_version: 2099-01-01\nresources: {}\n")
    assert p.startswith("heat_template_version: unknown version '2099-01-01'")
    assert "2021-04-16 (wallaby)" in p


def test_missing_version() -> None:
    assert parse_problems("resources: {}\n") == [
        "heat_template_version: the template has no heat_template_version"]


def test_cfn_templates_are_refused_clearly() -> None:
    [p] = parse_problems("AWSTemplateFormatVersion: '2010-09-09'\nResources: {}\n")
    assert "CloudFormation" in p


def test_a_template_must_be_a_map() -> None:
    [p] = parse_problems("- a\n- b\n")
    assert "must be a map of sections" in p


def test_unknown_section_suggests_the_right_one() -> None:
    found = parse_problems(hot(f"resource:\n  a: {{type: {R}}}\n"))
    assert found == ["resource: unknown section 'resource' (did you mean 'resources'?)"]


def test_section_from_a_later_version_names_it() -> None:
    found = parse_problems(hot("conditions: {c: true}\nresources: {}\n", "2015-10-15"))
    assert any("conditions: section 'conditions' is not allowed in heat_template_version "
               "2015-10-15 (available from 2016-10-14)" in p for p in found)


def test_function_not_in_the_version_names_the_version() -> None:
    text = hot(f"""
        resources:
          a:
            type: {R}
            properties:
              value: {{map_merge: [{{a: 1}}, {{b: 2}}]}}
        """, "2015-10-15")
    assert parse_problems(text) == [
        "resources.a.properties.value.map_merge: function 'map_merge' is not available in "
        "heat_template_version 2015-10-15 (available from 2016-04-08)"]


def test_removed_cfn_function_names_the_version() -> None:
    text = hot(f"""
        resources:
          a:
            type: {R}
            properties: {{value: {{"Fn::Join": [",", [a, b]]}}}}
        """, "2014-10-16")
    [p] = parse_problems(text)
    assert p.startswith("resources.a.properties.value.Fn::Join: function 'Fn::Join' is not "
                        "available in heat_template_version 2014-10-16")


def test_cfn_functions_work_in_2013() -> None:
    t = parse_template(hot(f"""
        resources:
          a: {{type: {R}, properties: {{value: {{"Fn::Join": [",", [a, b]]}}}}}}
          b: {{type: {R}, properties: {{value: {{Ref: a}}}}}}
        """, "2013-05-23"))
    assert isinstance(t.resources["a"].properties["value"], Call)
    assert t.resources["b"].requires() == {"a"}


def test_unknown_function_with_suggestion() -> None:
    text = hot(f"resources:\n  a: {{type: {R}, properties: {{value: {{get_parm: x}}}}}}\n")
    [p] = parse_problems(text)
    assert p == ("resources.a.properties.value.get_parm: unknown function 'get_parm'; "
                 "did you mean 'get_param'?")


def test_wrong_argument_shapes() -> None:
    text = hot(f"""
        resources:
          a:
            type: {R}
            properties:
              value: {{get_attr: only_a_string}}
              fail: {{get_resource: [a, list]}}
        """)
    found = parse_problems(text)
    assert "resources.a.properties.value.get_attr: get_attr: arguments must be a list " \
           "[resource] or [resource, attribute, path...]" in found
    assert "resources.a.properties.fail.get_resource: get_resource: arguments must be a " \
           "resource name" in found


def test_undefined_references_all_at_once() -> None:
    text = hot(f"""
        parameters:
          p: {{type: string}}
        resources:
          a:
            type: {R}
            depends_on: [nowhere]
            properties:
              value: {{get_param: missing}}
              update_replace_value: {{get_resource: ghost}}
          b:
            type: {R}
            properties: {{value: {{get_attr: [phantom, output]}}}}
        outputs:
          o: {{value: {{get_attr: [spectre, x]}}}}
        """)
    assert parse_problems(text) == [
        "resources.a.properties.value.get_param: get_param: parameter 'missing' is not defined",
        "resources.a.properties.update_replace_value.get_resource: get_resource: resource "
        "'ghost' is not defined",
        "resources.a.depends_on[0]: resource 'nowhere' is not defined",
        "resources.b.properties.value.get_attr: get_attr: resource 'phantom' is not defined",
        "outputs.o.value.get_attr: get_attr: resource 'spectre' is not defined",
    ]


def test_unknown_resource_and_output_keys() -> None:
    text = hot(f"""
        resources:
          a: {{type: {R}, propertes: {{}}}}
        outputs:
          o: {{value: 1, descripton: x}}
        """)
    assert parse_problems(text) == [
        "resources.a.propertes: unknown key 'propertes' (did you mean 'properties'?)",
        "outputs.o.descripton: unknown key 'descripton' (did you mean 'description'?)",
    ]


def test_resource_key_from_a_later_version() -> None:
    text = hot(f"resources:\n  a: {{type: {R}, condition: true}}\n", "2016-04-08")
    found = parse_problems(text)
    assert any("'condition' is not a resource key in heat_template_version 2016-04-08 "
               "(available from 2016-10-14)" in p for p in found)


def test_missing_type_and_bad_deletion_policy() -> None:
    text = hot("resources:\n  a: {properties: {}, deletion_policy: Keep}\n")
    found = parse_problems(text)
    assert "resources.a.type: the resource has no type" in found
    assert "resources.a.deletion_policy: deletion_policy must be one of Delete, Retain, " \
           "Snapshot, delete, retain, snapshot, not 'Keep'" in found
    old = parse_problems(hot("resources:\n  a: {type: X, deletion_policy: retain}\n",
                             "2015-10-15"))
    assert any("must be one of Delete, Retain, Snapshot, not 'retain'" in p for p in old)


def test_conditions_undefined_and_circular() -> None:
    text = hot(f"""
        conditions:
          a: {{not: b}}
          b: {{and: [a, true]}}
          c: {{or: [nope, true]}}
        resources:
          r: {{type: {R}, condition: undefined_one}}
        """)
    found = parse_problems(text)
    assert "conditions.a: conditions refer to each other in a circle: a -> b -> a" in found
    assert "conditions.c.or[0]: condition 'nope' is not defined" in found
    assert "resources.r.condition: condition 'undefined_one' is not defined" in found


def test_non_condition_function_in_a_condition() -> None:
    text = hot("conditions:\n  c: {get_resource: r}\nresources: {}\n")
    [p] = parse_problems(text)
    assert p.startswith("conditions.c.get_resource: function 'get_resource' cannot be used "
                        "in a condition")


def test_get_file_must_be_in_files() -> None:
    text = hot(f"""
        resources:
          a: {{type: {R}, properties: {{value: {{get_file: scripts/boot.sh}}}}}}
          b: {{type: {R}, properties: {{value: {{get_file: here.sh}}}}}}
        """)
    assert parse_problems(text, files={"here.sh": "echo"}) == [
        "resources.a.properties.value.get_file: get_file: 'scripts/boot.sh' is not in the "
        "files supplied with the template"]


def test_get_file_resolves_relative_to_the_template_location() -> None:
    text = hot(f"resources:\n  a: {{type: {R}, properties: {{value: {{get_file: ../x.sh}}}}}}\n")
    t = parse_template(text, files={"x.sh": "hi", "sub/t.yaml": text}, location="sub/t.yaml")
    assert "a" in t.resources


def test_parameter_groups_reference_parameters_once() -> None:
    text = hot("""
        parameter_groups:
          - parameters: [a, b]
          - parameters: [a, zz]
        parameters:
          a: {type: string}
          b: {type: string}
        resources: {}
        """)
    found = parse_problems(text)
    assert "parameter_groups[1].parameters[0]: parameter 'a' is already in parameter group " \
           "0; a parameter belongs to one group only" in found
    assert "parameter_groups[1].parameters[1]: parameter 'zz' is not defined" in found


def test_references_are_recorded_with_if_guards() -> None:
    t = parse_template(hot(f"""
        conditions: {{c: true}}
        resources:
          a: {{type: {R}}}
          b: {{type: {R}}}
          x:
            type: {R}
            properties:
              value: {{if: [c, {{get_attr: [a, output]}}, {{get_resource: b}}]}}
        """))
    assert t.resources["x"].requires() == {"a", "b"}
    assert t.resources["x"].requires({"c": True}) == {"a"}
    assert t.resources["x"].requires({"c": False}) == {"b"}
    assert t.resources["x"].requires({"c": None}) == {"a", "b"}


def test_plain_single_key_maps_are_data() -> None:
    t = parse_template(hot(f"""
        resources:
          a:
            type: {R}
            metadata: {{equals: not-a-function-here, owner: me}}
            properties: {{value: plain}}
        """))
    assert t.resources["a"].metadata == {"equals": "not-a-function-here", "owner": "me"}
