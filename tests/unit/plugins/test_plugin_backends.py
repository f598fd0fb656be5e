"""Plugin backends (``plugins/base.py``, ``plugins/registry.py``): a plugin declares what it
talks to, the registry builds each backend once from what the runtime hands every plugin, and
a call finds it in ``ctx.backends``; OS::Heat::TestResource's backend reads its latency from
its own environment variable as it is built (``plugins/heat/test_backend.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from convergence.plugins.base import BackendFactory, PluginBase, PluginHost
from convergence.plugins.heat.test_backend import (
    LATENCY_VARIABLE,
    TEST_ENTITIES,
    TableTestEntities,
)
from convergence.plugins.heat.test_resource import TestResource
from convergence.plugins.registry import PluginRegistry
from convergence.ports.entity_tables import EntityTable


class Tables:
    """Entity tables that hand out nothing but record what was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def table(self, name: str) -> EntityTable | None:
        self.asked.append(name)
        table: Any = object()
        return table if name == TEST_ENTITIES else None


def host(**environ: str) -> PluginHost:
    return PluginHost(now=lambda: 0.0, entity_tables=Tables(), environ=environ)


def test_a_bound_registry_holds_the_backends_its_plugins_declare() -> None:
    registry = PluginRegistry({"OS::Heat::TestResource": TestResource})
    assert registry.backends == {}
    bound = registry.bind(host())
    entities = bound.backends[TEST_ENTITIES]
    assert isinstance(entities, TableTestEntities) and entities.latency == 0.0
    assert bound.names() == registry.names() and registry.backends == {}


def test_the_test_backend_takes_its_latency_from_its_own_variable() -> None:
    bound = PluginRegistry({"OS::Heat::TestResource": TestResource}).bind(
        host(**{LATENCY_VARIABLE: "2.5"}))
    assert bound.backends[TEST_ENTITIES].latency == 2.5


def test_no_entity_tables_no_test_backend() -> None:
    registry = PluginRegistry({"OS::Heat::TestResource": TestResource})
    assert registry.bind(PluginHost(now=lambda: 0.0)).backends == {}


def test_a_backend_two_types_declare_is_built_once() -> None:
    built: list[PluginHost] = []

    def factory(h: PluginHost) -> object:
        built.append(h)
        return "backend"

    class A(PluginBase):
        schema = TestResource.schema
        backends: ClassVar[dict[str, BackendFactory]] = {"shared": factory}

    class B(A):
        pass

    class C(PluginBase):
        schema = TestResource.schema
        backends: ClassVar[dict[str, BackendFactory]] = {"shared": lambda h: "another"}

    assert PluginRegistry({"a": A, "b": B}).bind(host()).backends == {"shared": "backend"}
    assert len(built) == 1
    with pytest.raises(ValueError, match="'shared'"):
        PluginRegistry({"a": A, "c": C}).bind(host())
