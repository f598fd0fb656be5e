"""The registry of resource types: plugin classes by HOT type name, and their backends.

Plugins are found through the entry-point group ``convergence.resources`` (key: the HOT type
name, value: ``module:Class``), so third-party packages add types by being installed. Tests and
tools pass registries explicitly. The registry is the :class:`TypeCatalog` validation uses.

A registry bound to a runtime (:meth:`PluginRegistry.bind`, called by ``convergence.runtime``)
also holds the backends its plugins declared (``ResourcePlugin.backends``), each built once
from the :class:`~convergence.plugins.base.PluginHost` the runtime hands every plugin; the
engine passes them to every plugin call (``PluginContext.backends``).

Callers: ``convergence.runtime`` (``from_entry_points``, ``bind``), the engine (a plugin class
by type name), ``convergence.services`` (the catalog of validation when no runtime is at hand),
``type_schemas`` (the listings of the API's ``catalog`` and the CLI), tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol

from convergence.plugins.base import BackendFactory, PluginHost
from convergence.template.properties import TypeSchema

GROUP = "convergence.resources"


class Plugin(Protocol):
    """What the registry needs of a plugin class: its schema."""

    schema: TypeSchema


class PluginRegistry:
    """Resource types by name. Implements the template package's ``TypeCatalog``."""

    def __init__(self, plugins: Mapping[str, type[Plugin]]) -> None:
        self._plugins = dict(plugins)
        # The backends of a bound registry by name; tests may swap one for another.
        self.backends: dict[str, Any] = {}

    @classmethod
    def from_entry_points(cls, group: str = GROUP) -> PluginRegistry:
        found: dict[str, type[Plugin]] = {}
        for ep in entry_points(group=group):
            found[ep.name] = ep.load()
        return cls(found)

    def bind(self, host: PluginHost) -> PluginRegistry:
        """A registry of the same plugins holding their backends built from ``host``.

        A backend several plugins declare (by the same factory) is built once; a factory that
        builds nothing (what it needs is not there) leaves its plugin without that backend.
        """
        factories: dict[str, BackendFactory] = {}
        for type_name, plugin in sorted(self._plugins.items()):
            declared: Mapping[str, BackendFactory] = getattr(plugin, "backends", {})
            for name, factory in declared.items():
                if factories.setdefault(name, factory) is not factory:
                    raise ValueError(f"backend {name!r} of {type_name} is declared with "
                                     "another factory by another resource type")
        bound = PluginRegistry(self._plugins)
        for name, factory in factories.items():
            backend = factory(host)
            if backend is not None:
                bound.backends[name] = backend
        return bound

    def lookup(self, type_name: str) -> TypeSchema | None:
        plugin = self._plugins.get(type_name)
        return plugin.schema if plugin is not None else None

    def names(self) -> list[str]:
        return sorted(self._plugins)

    def plugin(self, type_name: str) -> type[Plugin] | None:
        return self._plugins.get(type_name)

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._plugins
