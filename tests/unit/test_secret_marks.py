"""Which values of a stack are secrets (``convergence.engine.secrets``), table by table: what
types declare, what takes a hidden parameter's value or another resource's secret, and what a
template with neither costs (its types' own, nothing worked out)."""

from __future__ import annotations

from typing import Any

import pytest

from convergence.engine.secrets import SecretMarks
from convergence.ports.views import SecretFields
from convergence.template import StackDefinition, StaticCatalog, TypeSchema, validate_stack
from convergence.template.properties import STRING, PropertySchema

ANY = PropertySchema(STRING)
CATALOG = StaticCatalog(
    TypeSchema("Value", properties={"value": ANY, "other": ANY},
               attributes=frozenset({"value"})),
    TypeSchema("Server", properties={"admin_pass": ANY, "key_name": ANY, "name": ANY},
               attributes=frozenset({"name", "show"}),
               secret_properties=frozenset({"admin_pass"})),
    TypeSchema("KeyPair", properties={"name": ANY},
               attributes=frozenset({"public_key", "private_key"}),
               secret_attributes=frozenset({"private_key"})),
    TypeSchema("Random", properties={}, attributes=frozenset({"value"}),
               secret_attributes=frozenset({"value"}), secret_reference=True),
)
SERVER = SecretFields(frozenset({"admin_pass"}))
ECHOING = SecretFields(frozenset({"value"}), all_attributes=True, reference=True)


def definition(resources: str, parameters: str = "", outputs: str = "",
               values: dict[str, Any] | None = None) -> StackDefinition:
    text = "heat_template_version: 2018-08-31\n"
    if parameters:
        text += f"parameters:\n{parameters}"
    text += f"resources:\n{resources}"
    if outputs:
        text += f"outputs:\n{outputs}"
    return validate_stack(text, catalog=CATALOG, parameters=values or {})


def marks() -> SecretMarks:
    return SecretMarks(CATALOG.lookup)


def fields(d: StackDefinition, name: str) -> SecretFields | None:
    return marks().of(d, name, d.resource_types[name], "tid")


HIDDEN = """\
  pw: {type: string, hidden: true}
  shown: {type: string, default: x}
"""


@pytest.mark.parametrize(("resources", "name", "expected"), [
    # a type's own
    ("  s: {type: Server, properties: {admin_pass: {get_param: shown}}}\n", "s", SERVER),
    ("  k: {type: KeyPair, properties: {name: k}}\n", "k",
     SecretFields(attributes=frozenset({"private_key"}))),
    ("  v: {type: Value, properties: {value: {get_param: shown}}}\n", "v", None),
    # a hidden parameter's value: the property, and whatever the resource echoes
    ("  v: {type: Value, properties: {value: {get_param: pw}, other: x}}\n", "v", ECHOING),
    ("  v: {type: Value, properties: {value: {list_join: ['-', [{get_param: pw}]]}}}\n",
     "v", ECHOING),
    # as a server's admin password: that property only (its attributes do not echo it)
    ("  s: {type: Server, properties: {admin_pass: {get_param: pw}}}\n", "s", SERVER),
    # another resource's secret attribute or reference; not its other attributes
    ("  k: {type: KeyPair, properties: {name: k}}\n"
     "  v: {type: Value, properties: {value: {get_attr: [k, private_key]}}}\n", "v", ECHOING),
    ("  k: {type: KeyPair, properties: {name: k}}\n"
     "  v: {type: Value, properties: {value: {get_attr: [k, public_key]}}}\n", "v", None),
    ("  k: {type: KeyPair, properties: {name: k}}\n"
     "  s: {type: Server, properties: {key_name: {get_resource: k}}}\n", "s", SERVER),
    ("  r: {type: Random}\n"
     "  s: {type: Server, properties: {name: {get_resource: r}}}\n", "s",
     SecretFields(frozenset({"admin_pass", "name"}), all_attributes=True, reference=True)),
    # passed on: what echoes a secret is a secret's source too
    ("  a: {type: Value, properties: {value: {get_param: pw}}}\n"
     "  b: {type: Value, properties: {value: {get_attr: [a, value]}}}\n", "b", ECHOING),
])
def test_what_is_secret(resources: str, name: str, expected: SecretFields | None) -> None:
    assert fields(definition(resources, HIDDEN, values={"pw": "p"}), name) == expected


def test_a_long_chain_is_followed_without_recursion() -> None:
    n = 5000
    resources = "  r0: {type: Value, properties: {value: {get_param: pw}}}\n" + "".join(
        f"  r{i}: {{type: Value, properties: {{value: {{get_attr: [r{i - 1}, value]}}}}}}\n"
        for i in range(1, n))
    d = definition(resources, HIDDEN, values={"pw": "p"})
    assert fields(d, f"r{n - 1}") == ECHOING


def test_outputs_that_take_a_secret() -> None:
    d = definition("  k: {type: KeyPair, properties: {name: k}}\n"
                   "  v: {type: Value, properties: {value: {get_param: shown}}}\n", HIDDEN,
                   "  key: {value: {get_attr: [k, private_key]}}\n"
                   "  public: {value: {get_attr: [k, public_key]}}\n"
                   "  password: {value: {get_param: pw}}\n"
                   "  plain: {value: {get_attr: [v, value]}}\n", {"pw": "p"})
    assert marks().outputs(d, "tid") == {"key", "password"}


def test_a_template_without_secrets_is_not_worked_out() -> None:
    d = definition("  v: {type: Value, properties: {value: {get_param: shown}}}\n"
                   "  s: {type: Server, properties: {admin_pass: {get_param: shown}}}\n",
                   "  shown: {type: string, default: x}\n")
    found = marks()
    assert found.of(d, "v", "Value", "tid") is None
    assert found.of(d, "s", "Server", "tid") == SERVER
    assert found.outputs(d, "tid") == frozenset()
    assert found.of(None, "gone", "KeyPair") == SecretFields(
        attributes=frozenset({"private_key"}))
