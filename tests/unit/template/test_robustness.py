"""Whatever the input, validation answers with a result or a TemplateError, never a crash."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convergence.template import TemplateError, validate_stack
from convergence.template.versions import ALL_FUNCTION_NAMES

from .conftest import CATALOG

NAMES = st.sampled_from(["a", "b", "c", "p", "q", "x"])
FUNCTIONS = st.sampled_from(sorted(ALL_FUNCTION_NAMES))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), NAMES,
                    st.sampled_from(["", "output", "value", "$x", "%index%", "Delete"]))


def _values() -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(NAMES, children, max_size=3),
            st.builds(lambda f, a: {f: a}, FUNCTIONS, children),
        ),
        max_leaves=12,
    )


VALUES = _values()
RESOURCE = st.fixed_dictionaries(
    {"type": st.sampled_from(["OS::Heat::TestResource", "OS::Heat::Value", "OS::Heat::None",
                              "OS::Heat::RandomString", "nested.yaml", "X::Y"])},
    optional={"properties": VALUES, "depends_on": st.one_of(NAMES, st.lists(NAMES)),
              "condition": VALUES, "metadata": VALUES, "deletion_policy": VALUES,
              "update_policy": VALUES, "external_id": VALUES},
)
TEMPLATE = st.fixed_dictionaries(
    {"heat_template_version": st.sampled_from(["2013-05-23", "2015-10-15", "newton", "pike",
                                               "wallaby"])},
    optional={
        "parameters": st.dictionaries(NAMES, st.fixed_dictionaries(
            {"type": st.sampled_from(["string", "number", "json", "boolean",
                                      "comma_delimited_list", "nope"])},
            optional={"default": VALUES, "constraints": VALUES}), max_size=3),
        "conditions": st.dictionaries(NAMES, VALUES, max_size=3),
        "resources": st.dictionaries(NAMES, RESOURCE, max_size=4),
        "outputs": st.dictionaries(NAMES, st.fixed_dictionaries({"value": VALUES}), max_size=2),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEMPLATE, st.one_of(st.none(), st.dictionaries(NAMES, SCALARS, max_size=3)))
def test_validation_never_crashes(template: dict[str, Any], params: dict[str, Any] | None) -> None:
    nested = "heat_template_version: 2018-08-31\nparameters: {a: {type: string}}\nresources: {}\n"
    try:
        validate_stack(template, catalog=CATALOG, parameters=params,
                       files={"nested.yaml": nested})
    except TemplateError as exc:
        assert all(p.message for p in exc.problems)
