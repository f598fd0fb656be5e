"""Environments: sections, the resource registry (types, hooks, nesting) and merging files."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.template.environment import (
    Environment,
    ResourceRegistry,
    ResourceSection,
    load_environment,
    merge_environments,
    parse_environment,
)
from convergence.template.errors import ENVIRONMENT, SYNTAX, Problems, TemplateError
from convergence.template.parameters import ParameterSchema


def parse(data: Any, what: str = "env") -> tuple[Environment, list[str]]:
    problems = Problems()
    env = parse_environment(data, what, problems)
    assert all(p.kind == ENVIRONMENT for p in problems)
    return env, [str(p) for p in problems]


def registry(data: dict[str, Any]) -> ResourceRegistry:
    env, errors = parse({"resource_registry": data})
    assert errors == []
    return env.resource_registry


def load(text: str) -> tuple[Environment, list[str]]:
    problems = Problems()
    env = load_environment(text, "env.yaml", problems)
    return env, [str(p) for p in problems]


# -- sections --------------------------------------------------------------------------------


def test_every_section() -> None:
    env, errors = load("""
parameters:
  flavor: m1.small
parameter_defaults:
  NtpServer: pool.ntp.org
resource_registry:
  OS::Custom::Thing: thing.yaml
event_sinks:
  - type: zaqar-queue
    target: events
    ttl: 3600
encrypted_param_names: [password]
parameter_merge_strategies:
  default: merge
  flavor: overwrite
""")
    assert errors == []
    assert env.parameters == {"flavor": "m1.small"}
    assert env.parameter_defaults == {"NtpServer": "pool.ntp.org"}
    assert env.resource_registry.mappings == {"OS::Custom::Thing": "thing.yaml"}
    assert env.event_sinks == ({"type": "zaqar-queue", "target": "events", "ttl": 3600},)
    assert env.encrypted_param_names == ("password",)
    assert env.parameter_merge_strategies == {"default": "merge", "flavor": "overwrite"}
    assert env.source == "env.yaml"


def test_empty_document_is_an_empty_environment() -> None:
    env, errors = load("")
    assert errors == []
    assert env == Environment(source="env.yaml")
    assert Environment().parameters == {}


def test_syntax_error_becomes_a_problem() -> None:
    problems = Problems()
    env = load_environment("parameters: [unclosed", "env.yaml", problems)
    assert env == Environment(source="env.yaml")
    assert [p.kind for p in problems] == [SYNTAX]
    assert next(iter(problems)).path == "env.yaml"


def test_environment_must_be_a_map() -> None:
    assert parse(["parameters"])[1] == [
        "env: an environment must be a map of sections (parameters, parameter_defaults, "
        "resource_registry, event_sinks, encrypted_param_names, parameter_merge_strategies)"]


def test_unknown_section_is_named() -> None:
    env, errors = parse({"parameter_default": {"a": 1}, "outputs": {}, "parameters": {"b": 2}})
    assert errors == [
        "env.parameter_default: unknown section 'parameter_default'; the sections are "
        "parameters, parameter_defaults, resource_registry, event_sinks, encrypted_param_names, "
        "parameter_merge_strategies; did you mean 'parameter_defaults'?",
        "env.outputs: unknown section 'outputs'; the sections are parameters, "
        "parameter_defaults, resource_registry, event_sinks, encrypted_param_names, "
        "parameter_merge_strategies",
    ]
    assert env.parameters == {"b": 2}


def test_empty_section_is_refused_as_in_heat() -> None:
    assert parse({"parameter_defaults": None})[1] == [
        "env.parameter_defaults: section 'parameter_defaults' is empty; remove it or give it "
        "entries"]


def test_section_shapes() -> None:
    errors = parse({
        "parameters": ["a"],
        "parameter_defaults": {1: "x"},
        "resource_registry": "OS::A",
        "event_sinks": {"type": "zaqar-queue"},
        "encrypted_param_names": "password",
        "parameter_merge_strategies": ["merge"],
    })[1]
    assert errors == [
        "env.parameters: parameters must be a map of parameter names to values, not a list",
        "env.parameter_defaults.1: parameter name 1 must be a string",
        "env.resource_registry: resource_registry must be a map, not 'OS::A'",
        "env.parameter_merge_strategies: parameter_merge_strategies must be a map of parameter "
        "names (or 'default') to overwrite, merge, deep_merge",
        "env.event_sinks: event_sinks must be a list of sinks, not a map",
        "env.encrypted_param_names: encrypted_param_names must be a list of parameter names",
    ]


def test_merge_strategy_names_are_checked() -> None:
    env, errors = parse({"parameter_merge_strategies": {"a": "deep-merge", "b": "merge"}})
    assert errors == ["env.parameter_merge_strategies.a: unknown merge strategy 'deep-merge'; "
                      "the strategies are overwrite, merge, deep_merge"]
    assert env.parameter_merge_strategies == {"b": "merge"}


def test_event_sinks_are_checked() -> None:
    env, errors = parse({"event_sinks": [
        {"type": "zaqar-queue", "target": "q"},
        {"type": "kafka", "target": "t"},
        {"type": "zaqar-queue"},
        {"type": "zaqar-queue", "target": "q", "ttl": -1, "color": "red"},
        "zaqar-queue",
    ]})
    assert env.event_sinks == ({"type": "zaqar-queue", "target": "q"},)
    assert errors == [
        "env.event_sinks[1].type: unknown event sink type 'kafka'; the types are zaqar-queue",
        "env.event_sinks[2].target: a zaqar-queue sink needs a target (a queue name)",
        "env.event_sinks[3].color: unknown key 'color' for a zaqar-queue sink",
        "env.event_sinks[3].ttl: ttl must be a positive number of seconds",
        "env.event_sinks[4]: an event sink must be a map with a type, such as "
        "{type: zaqar-queue, target: my-queue}",
    ]


# -- registry: parsing -----------------------------------------------------------------------


def test_registry_entries() -> None:
    reg = registry({
        "OS::Foo": "OS::Bar",
        "OS::Old": None,
        "base_url": "file:///templates/",
        "resources": {
            "web_*": {"hooks": "pre-create", "restricted_actions": ["update", "replace"]},
            "db": {"OS::Foo": "db.yaml", "child": {"hooks": ["pre-delete", "post-delete"]}},
            0: {"hooks": "post-update"},
        },
    })
    assert reg.mappings == {"OS::Foo": "OS::Bar", "OS::Old": None}
    assert reg.base_url == "file:///templates/"
    assert reg.resources == {
        "web_*": ResourceSection(hooks=frozenset({"pre-create"}),
                                 restricted_actions=frozenset({"update", "replace"})),
        "db": ResourceSection(mappings={"OS::Foo": "db.yaml"}, children={
            "child": ResourceSection(hooks=frozenset({"pre-delete", "post-delete"}))}),
        "0": ResourceSection(hooks=frozenset({"post-update"})),
    }


def test_registry_errors_are_collected() -> None:
    errors = parse({"resource_registry": {
        "OS::Map": {"x": 1},
        "OS::Empty": "",
        "OS::Number": 5,
        "hooks": "pre-create",
        "resources": {
            "a": {"hooks": ["pre-create", "pre-craete"]},
            "b": {"restricted_actions": "delete"},
            "c": "OS::Heat::None",
            "d": {"hooks": {"x": 1}},
            "e": {"OS::X": ["OS::Y"]},
        },
    }})[1]
    assert errors == [
        "env.resource_registry.OS::Map: 'OS::Map' must map to a resource type or a template "
        "file, not a map (settings for particular resources go under resources)",
        "env.resource_registry.OS::Empty: 'OS::Empty' must map to a resource type or a "
        "template file, not ''",
        "env.resource_registry.OS::Number: 'OS::Number' must map to a resource type or a "
        "template file, not 5",
        "env.resource_registry.hooks: hooks apply to resources: set them under "
        "resources.<resource name>.hooks",
        "env.resource_registry.resources.a.hooks[1]: unknown hook 'pre-craete'; the hooks are "
        "pre-create, pre-update, pre-delete, post-create, post-update, post-delete; did you "
        "mean 'pre-create'?",
        "env.resource_registry.resources.b.restricted_actions: unknown restricted action "
        "'delete'; the restricted actions are update, replace",
        "env.resource_registry.resources.c: the settings of a resource must be a map (hooks, "
        "restricted_actions, type mappings, or the resources of its nested stack), not "
        "'OS::Heat::None'",
        "env.resource_registry.resources.d.hooks: must be a hook or a list of them (pre-create, "
        "pre-update, pre-delete, post-create, post-update, post-delete), not a map",
        "env.resource_registry.resources.e.OS::X: 'OS::X' must map to a resource type or a "
        "template file, not a list",
    ]


def test_resources_must_be_a_map() -> None:
    assert parse({"resource_registry": {"resources": ["a"]}})[1] == [
        "env.resource_registry.resources: resources must be a map of resource names (or "
        "patterns such as 'server_*') to settings, not a list"]


# -- registry: types -------------------------------------------------------------------------


def test_alias_chain_and_template() -> None:
    reg = registry({"OS::A": "OS::B", "OS::B": "OS::C", "OS::C": "c.yaml"})
    assert reg.resolve_type("r", "OS::A") == "c.yaml"
    assert reg.resolve_type("r", "OS::B") == "c.yaml"
    assert reg.resolve_type("r", "OS::Nova::Server") == "OS::Nova::Server"


def test_disable_with_heat_none() -> None:
    reg = registry({"OS::TripleO::Services::Foo": "OS::Heat::None"})
    assert reg.resolve_type("r", "OS::TripleO::Services::Foo") == "OS::Heat::None"


def test_a_template_type_is_never_mapped() -> None:
    reg = registry({"x.yaml": "y.yaml", "a.template": "OS::A"})
    assert reg.resolve_type("r", "x.yaml") == "x.yaml"
    assert reg.resolve_type("r", "a.template") == "a.template"


def test_cycles_are_errors() -> None:
    reg = registry({"OS::A": "OS::B", "OS::B": "OS::C", "OS::C": "OS::A"})
    with pytest.raises(TemplateError) as info:
        reg.resolve_type("r", "OS::A")
    assert str(info.value) == ("resource_registry: type mappings form a cycle: OS::A -> OS::B "
                               "-> OS::C -> OS::A")
    assert info.value.kinds == {ENVIRONMENT}
    with pytest.raises(TemplateError, match="OS::Self -> OS::Self"):
        registry({"OS::Self": "OS::Self"}).resolve_type("r", "OS::Self")


def test_wildcard_prefix_mapping() -> None:
    reg = registry({"OS::Quantum*": "OS::Neutron*", "AWS::*": "OS::Heat::None"})
    assert reg.resolve_type("r", "OS::Quantum::Net") == "OS::Neutron::Net"
    assert reg.resolve_type("r", "AWS::EC2::Instance") == "OS::Heat::None"
    assert reg.resolve_type("r", "OS::Nova::Server") == "OS::Nova::Server"


def test_many_to_one_wildcard_does_not_match_its_target() -> None:
    reg = registry({"OS::*": "OS::Heat::None"})
    assert reg.resolve_type("r", "OS::Nova::Server") == "OS::Heat::None"


def test_self_feeding_wildcard_is_stopped() -> None:
    reg = registry({"OS::*": "OS::X::*"})
    with pytest.raises(TemplateError, match="more than 50 types; a wildcard mapping probably "
                                            "matches its own result"):
        reg.resolve_type("r", "OS::Nova::Server")


def test_wildcard_with_a_template_target_is_not_a_wildcard() -> None:
    reg = registry({"OS::Foo::*": "foo.yaml"})
    assert reg.resolve_type("r", "OS::Foo::Bar") == "OS::Foo::Bar"


def test_heats_preference_sorted_keys_so_a_wildcard_can_beat_an_exact_key() -> None:
    # Heat sorts candidates by path; "OS::Nova::*" sorts before "OS::Nova::Server".
    reg = registry({"OS::Nova::Server": "server.yaml", "OS::Nova::*": "OS::Heat::None"})
    assert reg.resolve_type("r", "OS::Nova::Server") == "OS::Heat::None"


def test_known_types_let_a_dead_end_fall_through() -> None:
    reg = registry({"OS::Nova::Server": "OS::Missing", "OS::Nova::*": "OS::Gone::*"})
    known = {"OS::Nova::Server"}.__contains__
    assert reg.resolve_type("r", "OS::Nova::Server", known=known) == "OS::Nova::Server"
    reg = registry({"OS::Nova::Server": "OS::Real", "OS::Nova::*": "OS::Gone::*"})
    assert reg.resolve_type("r", "OS::Nova::Server",
                            known={"OS::Real"}.__contains__) == "OS::Real"
    # Nothing known at all: the chain Heat would try first, so messages name its end.
    assert reg.resolve_type("r", "OS::Nova::Server", known=lambda t: False) == "OS::Gone::Server"


def test_per_resource_mapping_applies_to_the_exact_name_only() -> None:
    reg = registry({
        "OS::Nova::Server": "server.yaml",
        "resources": {
            "db": {"OS::Nova::Server": "OS::Heat::None"},
            "web_*": {"OS::Nova::Server": "web.yaml"},
        },
    })
    assert reg.resolve_type("db", "OS::Nova::Server") == "OS::Heat::None"
    assert reg.resolve_type("web_1", "OS::Nova::Server") == "server.yaml"
    assert reg.resolve_type("other", "OS::Nova::Server") == "server.yaml"


def test_per_resource_mapping_continues_through_global_aliases() -> None:
    reg = registry({"OS::B": "OS::C", "resources": {"r": {"OS::A": "OS::B"}}})
    assert reg.resolve_type("r", "OS::A") == "OS::C"
    assert reg.resolve_type("s", "OS::A") == "OS::A"


def test_template_mappings_and_files() -> None:
    reg = registry({
        "OS::A": "a.yaml",
        "OS::B": "https://example.com/b.template",
        "OS::C": "OS::Heat::None",
        "OS::D": None,
        "resources": {"r": {"OS::E": "e.yaml", "nested": {"OS::F": "f.yaml"}}},
    })
    assert reg.template_mappings() == {"OS::A": "a.yaml",
                                       "OS::B": "https://example.com/b.template"}
    assert reg.template_files() == {"a.yaml", "https://example.com/b.template", "e.yaml",
                                    "f.yaml"}


# -- registry: hooks, restrictions, nesting --------------------------------------------------


def test_hooks_match_names_and_globs() -> None:
    reg = registry({"resources": {
        "web_*": {"hooks": "pre-create"},
        "*_1": {"hooks": ["pre-update", "post-create"]},
        "db": {"hooks": ["pre-delete"]},
        "Web_2": {"hooks": "post-delete"},
    }})
    assert reg.hooks_for("web_1") == {"pre-create", "pre-update", "post-create"}
    assert reg.hooks_for("web_2") == {"pre-create"}
    assert reg.hooks_for("db") == {"pre-delete"}
    assert reg.hooks_for("dbx") == frozenset()
    assert reg.hooks_for("Web_3") == frozenset()  # case-sensitive, as fnmatchcase


def test_restricted_actions() -> None:
    reg = registry({"resources": {"*": {"restricted_actions": "replace"},
                                  "volume": {"restricted_actions": ["update"]}}})
    assert reg.restricted_actions_for("volume") == {"update", "replace"}
    assert reg.restricted_actions_for("server") == {"replace"}


def test_nested_registry_takes_the_matching_sections_children() -> None:
    reg = registry({
        "OS::A": "OS::B",
        "resources": {
            "group": {
                "hooks": "pre-create",
                "0": {"hooks": "pre-update"},
                "1": {"hooks": "pre-delete"},
            },
            "gr*": {"1": {"hooks": "post-create"}, "2": {"restricted_actions": "update"}},
            "other": {"0": {"hooks": "post-delete"}},
        },
    })
    child = reg.nested("group")
    assert child.mappings == {"OS::A": "OS::B"}
    # The exact name comes last and wins over the glob for the same child.
    assert child.hooks_for("0") == {"pre-update"}
    assert child.hooks_for("1") == {"pre-delete"}
    assert child.restricted_actions_for("2") == {"update"}
    assert child.hooks_for("group") == frozenset()  # the parent's own hooks stay in the parent
    assert reg.nested("unrelated").resources == {}


def test_nested_for_two_levels() -> None:
    reg = registry({"resources": {"a": {"b": {"c": {"hooks": "pre-create"}}}}})
    assert reg.nested("a").nested("b").hooks_for("c") == {"pre-create"}


def test_nested_leaves_out_the_mapping_that_made_the_template_resource() -> None:
    reg = registry({"OS::Nova::Server": "my_server.yaml", "OS::Wrapper": "OS::Nova::Server",
                    "OS::Other": "other.yaml"})
    child = reg.nested("server", "OS::Wrapper")
    # Inside my_server.yaml, OS::Nova::Server is the real plugin again.
    assert child.resolve_type("inner", "OS::Nova::Server") == "OS::Nova::Server"
    assert child.resolve_type("inner", "OS::Wrapper") == "OS::Nova::Server"
    assert child.mappings["OS::Other"] == "other.yaml"
    assert reg.nested("server").mappings == reg.mappings


# -- merging ---------------------------------------------------------------------------------


def env_of(data: dict[str, Any], what: str) -> Environment:
    env, errors = parse(data, what)
    assert errors == []
    return env


def merge(*files: dict[str, Any], schemas: dict[str, ParameterSchema] | None = None
          ) -> Environment:
    return merge_environments([env_of(f, f"e{i}.yaml") for i, f in enumerate(files)], schemas)


def merge_error(*files: dict[str, Any],
                schemas: dict[str, ParameterSchema] | None = None) -> list[str]:
    with pytest.raises(TemplateError) as info:
        merge(*files, schemas=schemas)
    assert info.value.kinds == {ENVIRONMENT}
    return [str(p) for p in info.value.problems]


def test_merge_of_nothing_is_empty() -> None:
    assert merge_environments([]) == Environment()


def test_overwrite_is_the_default_and_nulls_do_not_replace() -> None:
    env = merge({"parameters": {"a": 1, "b": 2}, "parameter_defaults": {"x": "1"}},
                {"parameters": {"a": 10, "b": None, "c": 3}},
                {"parameter_defaults": {"x": "2", "y": "3"}})
    assert env.parameters == {"a": 10, "b": 2, "c": 3}
    assert env.parameter_defaults == {"x": "2", "y": "3"}
    assert env.source == "e0.yaml, e1.yaml, e2.yaml"
    assert env.parameter_merge_strategies == {}


def test_merge_json_is_shallow_and_deep_merge_is_deep() -> None:
    first = {"parameter_defaults": {"Cfg": {"a": {"x": 1, "l": [1]}, "s": "ab", "k": 1}}}
    later = {"parameter_defaults": {"Cfg": {"a": {"y": 2, "l": [2]}, "s": "cd", "n": None}}}
    shallow = merge(first, {**later, "parameter_merge_strategies": {"Cfg": "merge"}})
    assert shallow.parameter_defaults["Cfg"] == {"a": {"y": 2, "l": [2]}, "s": "cd", "k": 1}
    deep = merge(first, {**later, "parameter_merge_strategies": {"default": "deep_merge"}})
    assert deep.parameter_defaults["Cfg"] == {"a": {"x": 1, "y": 2, "l": [1, 2]}, "s": "abcd",
                                              "k": 1}


def test_merge_json_strings_by_schema() -> None:
    schemas = {"Cfg": ParameterSchema("Cfg", "json")}
    env = merge({"parameters": {"Cfg": '{"a": 1}'}},
                {"parameters": {"Cfg": '{"b": 2}'}, "parameter_merge_strategies": {"Cfg": "merge"}},
                schemas=schemas)
    assert env.parameters["Cfg"] == {"a": 1, "b": 2}


def test_merge_comma_delimited_lists() -> None:
    schemas = {"L": ParameterSchema("L", "comma_delimited_list")}
    strategy = {"parameter_merge_strategies": {"L": "merge"}}
    assert merge({"parameters": {"L": "a,b"}}, {"parameters": {"L": "c"}, **strategy},
                 schemas=schemas).parameters["L"] == "a,b,c"
    assert merge({"parameters": {"L": ["a"]}}, {"parameters": {"L": ["b", "c"]}, **strategy}
                 ).parameters["L"] == ["a", "b", "c"]
    assert merge({"parameters": {"L": "a,b"}}, {"parameters": {"L": ["c"]}, **strategy},
                 schemas=schemas).parameters["L"] == ["a", "b", "c"]


def test_merge_strings_concatenates_without_a_separator_as_heat() -> None:
    env = merge({"parameters": {"S": "abc"}},
                {"parameters": {"S": "def"}, "parameter_merge_strategies": {"S": "merge"}})
    assert env.parameters["S"] == "abcdef"


def test_merge_numbers_adds() -> None:
    schemas = {"N": ParameterSchema("N", "number")}
    env = merge({"parameters": {"N": 2}},
                {"parameters": {"N": "3"}, "parameter_merge_strategies": {"N": "merge"}},
                schemas=schemas)
    assert env.parameters["N"] == 5


def test_merge_strategy_applies_to_the_file_that_declares_it() -> None:
    env = merge({"parameters": {"S": "a"}},
                {"parameters": {"S": "b"}, "parameter_merge_strategies": {"S": "merge"}},
                {"parameters": {"S": "c"}, "parameter_merge_strategies": {"S": "merge"}})
    assert env.parameters["S"] == "abc"


def test_booleans_cannot_merge() -> None:
    assert merge_error({"parameters": {"B": True}},
                       {"parameters": {"B": False},
                        "parameter_merge_strategies": {"B": "merge"}}) == [
        "e1.yaml.parameters.B: cannot merge parameter 'B': a boolean parameter can only be "
        "overwritten"]


def test_values_that_cannot_merge_are_errors() -> None:
    schemas = {"Cfg": ParameterSchema("Cfg", "json"), "S": ParameterSchema("S", "string")}
    assert merge_error({"parameters": {"Cfg": {"a": 1}, "S": "x"}},
                       {"parameters": {"Cfg": [1], "S": ["y"]},
                        "parameter_merge_strategies": {"default": "deep_merge"}},
                       schemas=schemas) == [
        "e1.yaml.parameters.Cfg: cannot deep merge parameter 'Cfg': a list is not a map",
        "e1.yaml.parameters.S: cannot deep merge parameter 'S': a list is not a string",
    ]


def test_conflicting_strategies_are_errors() -> None:
    assert merge_error({"parameters": {"S": "a"}},
                       {"parameters": {"S": "b"}, "parameter_merge_strategies": {"S": "merge"}},
                       {"parameters": {"S": "c"}}) == [
        "e2.yaml.parameters.S: parameter 'S' is merged with 'overwrite' here but with 'merge' "
        "by an earlier environment; a parameter takes one merge strategy"]


def test_first_file_values_are_taken_as_they_are() -> None:
    # As Heat: the first file to set a section is not merged, so its strategy is not recorded.
    env = merge({"parameters": {"S": "a"}, "parameter_merge_strategies": {"S": "merge"}},
                {"parameters": {"S": "b"}})
    assert env.parameters["S"] == "b"


def test_merge_does_not_change_its_inputs() -> None:
    first = env_of({"parameters": {"Cfg": {"a": {"x": 1}}}}, "a")
    later = env_of({"parameters": {"Cfg": {"a": {"y": 2}}},
                    "parameter_merge_strategies": {"Cfg": "deep_merge"}}, "b")
    merge_environments([first, later])
    assert first.parameters == {"Cfg": {"a": {"x": 1}}}
    assert later.parameters == {"Cfg": {"a": {"y": 2}}}


def test_registry_merge_later_wins_and_null_removes() -> None:
    env = merge(
        {"resource_registry": {"OS::A": "a.yaml", "OS::B": "b.yaml", "OS::Foo::X": "x.yaml",
                               "OS::Foo::Y": "y.yaml"}},
        {"resource_registry": {"OS::A": "OS::Heat::None", "OS::B": None, "OS::Foo::*": None}},
    )
    reg = env.resource_registry
    assert reg.resolve_type("r", "OS::A") == "OS::Heat::None"
    assert reg.resolve_type("r", "OS::B") == "OS::B"
    assert reg.resolve_type("r", "OS::Foo::X") == "OS::Foo::X"
    assert reg.template_mappings() == {}


def test_registry_merge_deep_merges_resource_sections() -> None:
    env = merge(
        {"resource_registry": {"resources": {
            "web": {"hooks": "pre-create", "OS::A": "a.yaml", "inner": {"hooks": "pre-update"}},
            "db": {"restricted_actions": "replace"}}}},
        {"resource_registry": {"resources": {
            "web": {"OS::B": "b.yaml", "inner": {"restricted_actions": "update"}},
            "db": {"restricted_actions": ["update"]}}}},
    )
    reg = env.resource_registry
    assert reg.hooks_for("web") == {"pre-create"}
    assert reg.resolve_type("web", "OS::A") == "a.yaml"
    assert reg.resolve_type("web", "OS::B") == "b.yaml"
    assert reg.restricted_actions_for("db") == {"update"}  # later list replaces
    inner = reg.nested("web")
    assert inner.hooks_for("inner") == {"pre-update"}
    assert inner.restricted_actions_for("inner") == {"update"}


def test_event_sinks_and_encrypted_names_accumulate() -> None:
    sink = {"type": "zaqar-queue", "target": "q"}
    env = merge({"event_sinks": [sink], "encrypted_param_names": ["a", "b"]},
                {"event_sinks": [sink], "encrypted_param_names": ["b", "c"]})
    assert env.event_sinks == (sink, sink)
    assert env.encrypted_param_names == ("a", "b", "c")


def test_load_then_merge_from_text() -> None:
    problems = Problems()
    envs = [load_environment(text, name, problems) for name, text in [
        ("base.yaml", "parameter_defaults: {Roles: [a]}\nresource_registry: {OS::X: x.yaml}\n"),
        ("extra.yaml", "parameter_merge_strategies: {Roles: merge}\n"
                       "parameter_defaults: {Roles: [b]}\n"),
    ]]
    assert not problems
    env = merge_environments(envs)
    assert env.parameter_defaults == {"Roles": ["a", "b"]}
    assert env.resource_registry.resolve_type("r", "OS::X") == "x.yaml"


def test_merge_messages_never_show_values() -> None:
    schemas = {"Secret": ParameterSchema("Secret", "string", hidden=True),
               "N": ParameterSchema("N", "number"), "J": ParameterSchema("J", "json")}
    errors = merge_error({"parameters": {"Secret": "hunter2", "N": 1, "J": {"a": 1}}},
                         {"parameters": {"Secret": 123456, "N": "lots", "J": "{hunter2"},
                          "parameter_merge_strategies": {"default": "merge"}},
                         schemas=schemas)
    assert errors[0] == ("e1.yaml.parameters.Secret: cannot merge parameter 'Secret': a number "
                         "is not a string")
    assert errors[1] == "e1.yaml.parameters.N: cannot merge parameter 'N': both values must be " \
                        "numbers"
    assert errors[2].startswith("e1.yaml.parameters.J: cannot merge parameter 'J': the value is "
                                "not valid JSON: ")
    assert not any("hunter2" in e or "123456" in e or "lots" in e for e in errors)


def test_nested_with_a_cyclic_type_does_not_raise() -> None:
    reg = registry({"OS::A": "OS::B", "OS::B": "OS::A"})
    assert reg.nested("r", "OS::A").mappings == reg.mappings
