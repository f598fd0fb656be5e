"""Validating a stack: types, properties, attributes, conditions, nested templates, cycles."""

from __future__ import annotations

import pytest

from convergence.template import (
    Problems,
    StaticCatalog,
    TemplateError,
    TypeSchema,
    load_environment,
    validate_stack,
)

from .conftest import CATALOG, hot, problems

R = "OS::Heat::TestResource"


def test_a_valid_stack_gives_types_dependencies_and_conditions() -> None:
    stack = validate_stack(hot(f"""
        parameters:
          flag: {{type: boolean, default: false}}
        conditions:
          enabled: {{get_param: flag}}
        resources:
          a: {{type: {R}}}
          b: {{type: {R}, properties: {{value: {{get_attr: [a, output]}}}}}}
          c: {{type: {R}, condition: enabled, depends_on: b}}
        """), catalog=CATALOG)
    assert stack.conditions == {"enabled": False}
    assert dict(stack.dependencies) == {"a": frozenset(), "b": frozenset({"a"})}
    assert stack.resource_types == {"a": R, "b": R}


def test_unknown_resource_type_is_honest() -> None:
    found = problems(hot("resources:\n  s: {type: OS::Trove::Instance}\n"))
    assert found == ["resources.s.type: resource type 'OS::Trove::Instance' is not available"]


def test_type_suggestion() -> None:
    [p] = problems(hot("resources:\n  s: {type: OS::Heat::TestResorce}\n"))
    assert "did you mean 'OS::Heat::TestResource'" in p


def test_property_schema_violations_all_at_once() -> None:
    found = problems(hot(f"""
        resources:
          a:
            type: {R}
            properties:
              valeu: x
              fail: maybe
              wait_secs: [1]
          r:
            type: OS::Heat::RandomString
            properties:
              length: 0
              character_classes: [{{class: emoji}}]
          v: {{type: OS::Heat::Value}}
        """))
    assert found == [
        "resources.a.properties.valeu: unknown property 'valeu'; did you mean 'value'?",
        "resources.a.properties.fail: must be a boolean, not 'maybe'",
        "resources.a.properties.wait_secs: must be a number, not [1]",
        "resources.r.properties.length: the value must be at least 1",
        "resources.r.properties.character_classes[0].class: 'emoji' is not one of the allowed "
        "values: 'lettersdigits', 'letters', 'lowercase', 'uppercase', 'digits', 'hexdigits', "
        "'octdigits'",
        "resources.v.properties.value: property 'value' is required",
    ]


def test_properties_are_checked_after_parameters_resolve() -> None:
    text = hot(f"""
        parameters:
          n: {{type: number, default: 600}}
        resources:
          r: {{type: OS::Heat::RandomString, properties: {{length: {{get_param: n}}}}}}
          t: {{type: {R}, properties: {{value: {{get_attr: [r, value]}}}}}}
        """)
    assert problems(text) == ["resources.r.properties.length: the value must be at most 512"]
    assert problems(text, parameters={"n": 8}) == []


def test_attribute_names_are_checked_against_the_type() -> None:
    found = problems(hot(f"""
        resources:
          a: {{type: {R}}}
          b: {{type: {R}, properties: {{value: {{get_attr: [a, outptu]}}}}}}
          n: {{type: OS::Heat::None}}
          c: {{type: {R}, properties: {{value: {{get_attr: [n, anything]}}}}}}
          d: {{type: {R}, properties: {{value: {{get_attr: [a, show]}}}}}}
        """))
    assert found == ["resources.b.properties.value.get_attr: get_attr: 'a' has no attribute "
                     "'outptu': type 'OS::Heat::TestResource' has no such attribute; did you "
                     "mean 'output'?"]


def test_circular_dependencies_are_named() -> None:
    found = problems(hot(f"""
        resources:
          a: {{type: {R}, properties: {{value: {{get_attr: [c, output]}}}}}}
          b: {{type: {R}, depends_on: a}}
          c: {{type: {R}, properties: {{value: {{get_resource: b}}}}}}
          d: {{type: {R}, depends_on: d}}
        """))
    assert found == ["resources.a: circular dependency: a -> c -> b -> a",
                     "resources.d: circular dependency: d -> d"]


def test_cycles_through_an_untaken_branch_do_not_count() -> None:
    text = hot(f"""
        parameters:
          x: {{type: boolean, default: false}}
        conditions:
          c: {{get_param: x}}
        resources:
          a: {{type: {R}, properties: {{value: {{if: [c, {{get_attr: [b, output]}}, a]}}}}}}
          b: {{type: {R}, properties: {{value: {{get_attr: [a, output]}}}}}}
        """)
    assert problems(text) == []
    assert problems(text, parameters={"x": True}) == [
        "resources.a: circular dependency: a -> b -> a"]


def test_disabled_resources_cannot_be_used() -> None:
    found = problems(hot(f"""
        conditions:
          never: false
        resources:
          gone: {{type: {R}, condition: never}}
          here: {{type: {R}, properties: {{value: {{get_attr: [gone, output]}}}}, depends_on: gone}}
        outputs:
          o: {{value: {{get_resource: gone}}}}
          guarded: {{value: {{get_resource: gone}}, condition: never}}
        """))
    assert found == [
        "resources.here.properties.value.get_attr: resource 'gone' does not exist: its "
        "condition is false",
        "resources.here.depends_on: resource 'gone' does not exist: its condition is false",
        "outputs.o.value.get_resource: resource 'gone' does not exist: its condition is false",
    ]


def test_parameter_values_missing_and_unknown_only_when_values_are_given() -> None:
    text = hot(f"""
        parameters:
          need: {{type: string}}
          n: {{type: number, default: 1, constraints: [{{range: {{max: 5}}}}]}}
        resources:
          a: {{type: {R}, properties: {{value: {{get_param: need}}}}}}
        """)
    assert problems(text) == []
    found = problems(text, parameters={"n": "9", "nope": "1"})
    assert any(p.startswith("parameters.need") for p in found)
    assert any(p.startswith("parameters.n") for p in found)
    assert any("nope" in p for p in found)


def test_registry_aliases_and_none_mapping() -> None:
    env = load_environment("resource_registry:\n  My::Thing: OS::Heat::TestResource\n"
                           "  OS::Nova::Server: OS::Heat::None\n", "env.yaml", Problems())
    stack = validate_stack(hot("""
        resources:
          a: {type: My::Thing, properties: {value: x}}
          s: {type: OS::Nova::Server, properties: {anything: [goes]}}
        """), catalog=CATALOG, environments=[env])
    assert stack.resource_types == {"a": R, "s": "OS::Heat::None"}


NESTED = hot("""
    parameters:
      size: {type: number}
      label: {type: string, default: x}
    resources:
      inner: {type: OS::Heat::TestResource, properties: {value: {get_param: label}}}
    outputs:
      name: {value: {get_attr: [inner, output]}}
    """)


def test_template_resources_are_validated_recursively() -> None:
    files = {"node.yaml": NESTED}
    ok = hot(f"""
        resources:
          n: {{type: node.yaml, properties: {{size: 3}}}}
          user: {{type: {R}, properties: {{value: {{get_attr: [n, name]}}}}}}
          id: {{type: {R}, properties: {{value: {{get_attr: [n, OS::stack_id]}}}}}}
        """)
    stack = validate_stack(ok, catalog=CATALOG, files=files)
    assert "n" in stack.nested and stack.nested["n"].parameters["size"] == 3
    bad = hot(f"""
        resources:
          n: {{type: node.yaml, properties: {{sise: 3}}}}
          user: {{type: {R}, properties: {{value: {{get_attr: [n, nmae]}}}}}}
          m: {{type: missing.yaml}}
        """)
    found = problems(bad, files=files, parameters={})
    assert "resources.n.properties.sise: unknown property 'sise': template 'node.yaml' has " \
           "no such parameter; did you mean 'size'?" in found
    assert "resources.n.properties: property 'size' is required: template 'node.yaml' gives " \
           "it no default" in found
    assert any(p.startswith("resources.user.properties.value.get_attr: get_attr: 'n' has no "
                            "attribute 'nmae'") for p in found)
    assert "resources.m.type: template 'missing.yaml' is not in the files supplied with the " \
           "template" in found


def test_nested_required_values_are_only_demanded_when_values_are_given() -> None:
    text = hot("resources:\n  n: {type: node.yaml}\n")
    files = {"node.yaml": NESTED}
    assert problems(text, files=files) == []
    assert problems(text, files=files, parameters={}) == [
        "resources.n.properties: property 'size' is required: template 'node.yaml' gives it "
        "no default"]


def test_errors_inside_nested_templates_carry_both_paths() -> None:
    files = {"bad.yaml": hot("resources:\n  x: {type: OS::Nope}\n")}
    found = problems(hot("resources:\n  n: {type: bad.yaml}\n"), files=files)
    assert found == ["resources.n(bad.yaml).resources.x.type: resource type 'OS::Nope' is not "
                     "available"]


def test_nesting_is_limited() -> None:
    files = {"loop.yaml": hot("resources:\n  again: {type: loop.yaml}\n")}
    found = problems(hot("resources:\n  n: {type: loop.yaml}\n"), files=files)
    assert any("nested templates go deeper than 5 levels" in p for p in found)


def test_validation_raises_one_error_with_every_problem() -> None:
    with pytest.raises(TemplateError) as info:
        validate_stack(hot("resources:\n  a: {type: X::A}\n  b: {type: X::B}\n"),
                       catalog=CATALOG)
    assert len(info.value.problems) == 2
    assert info.value.kinds == {"resource-type"}


def test_a_template_that_wraps_the_type_it_replaces_does_not_nest_into_itself() -> None:
    env = load_environment("resource_registry:\n  My::Server: server.yaml\n", "env.yaml",
                           Problems())
    files = {"server.yaml": hot("""
        parameters:
          name: {type: string, default: s}
        resources:
          real: {type: My::Server}
        """)}
    found = problems(hot("resources:\n  s: {type: My::Server}\n"), files=files,
                     environments=[env])
    assert found == ["resources.s(server.yaml).resources.real.type: resource type 'My::Server' "
                     "is not available"]


def test_an_undefined_resource_in_get_attr_is_an_error_not_a_crash() -> None:
    found = problems(hot(f"""
        resources:
          a: {{type: {R}, properties: {{value: {{get_attr: [missing, x]}}}}}}
        """))
    assert found == ["resources.a.properties.value.get_attr: get_attr: resource 'missing' is "
                     "not defined"]


# Deletion policies -------------------------------------------------------------------------

SNAPSHOTTING = TypeSchema("Test::Volume", properties={}, snapshot=True)
WITH_VOLUMES = StaticCatalog(SNAPSHOTTING, TypeSchema("Test::Port", properties={}))


def test_snapshot_is_refused_for_every_type_here_naming_the_resource() -> None:
    # None of the types this project ships takes snapshots: Heat refuses the policy for such
    # a type ('"Snapshot" deletion policy not supported') rather than delete without one.
    found = problems(hot("""
        resources:
          db: {type: OS::Heat::TestResource, deletion_policy: Snapshot}
          n: {type: OS::Heat::None, deletion_policy: snapshot}
          v: {type: OS::Heat::Value, properties: {value: 1}, deletion_policy: Retain}
        """))
    assert found == [
        "resources.db.deletion_policy: \"Snapshot\" deletion policy not supported: resource "
        "type 'OS::Heat::TestResource' takes no snapshots",
        "resources.n.deletion_policy: \"Snapshot\" deletion policy not supported: resource "
        "type 'OS::Heat::None' takes no snapshots",
    ]


def test_snapshot_is_accepted_for_a_type_that_declares_it() -> None:
    with pytest.raises(TemplateError) as caught:
        validate_stack(hot("""
            resources:
              vol: {type: Test::Volume, deletion_policy: Snapshot}
              port: {type: Test::Port, deletion_policy: Snapshot}
            """), catalog=WITH_VOLUMES)
    assert [str(p) for p in caught.value.problems] == [
        "resources.port.deletion_policy: \"Snapshot\" deletion policy not supported: "
        "resource type 'Test::Port' takes no snapshots"]


def test_a_policy_from_a_parameter_is_checked_once_it_has_a_value() -> None:
    text = hot("""
        parameters:
          policy: {type: string}
        resources:
          db: {type: OS::Heat::TestResource, deletion_policy: {get_param: policy}}
        """)
    assert problems(text) == []  # validated alone: the value is not known yet
    assert problems(text, parameters={"policy": "Retain"}) == []
    assert problems(text, parameters={"policy": "Snapshot"}) == [
        "resources.db.deletion_policy: \"Snapshot\" deletion policy not supported: resource "
        "type 'OS::Heat::TestResource' takes no snapshots"]
    assert problems(text, parameters={"policy": "Keep"}) == [
        "resources.db.deletion_policy: deletion_policy must be one of Delete, Retain, "
        "Snapshot, delete, retain, snapshot, not 'Keep'"]


def test_a_template_resource_takes_no_snapshots() -> None:
    nested = "heat_template_version: 2018-08-31\nresources: {}\n"
    found = problems(hot("""
        resources:
          inner: {type: inner.yaml, deletion_policy: Snapshot}
        """), files={"inner.yaml": nested})
    assert found == ["resources.inner.deletion_policy: \"Snapshot\" deletion policy not "
                     "supported: a template resource takes no snapshots"]
