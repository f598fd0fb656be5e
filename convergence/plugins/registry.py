"""The registry of resource types: plugin classes by HOT type name.

Plugins are found through the entry-point group ``convergence.resources`` (key: the HOT type
name, value: ``module:Class``), so third-party packages add types by being installed. Tests and
tools pass registries explicitly. The registry is the :class:`TypeCatalog` validation uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Protocol

from convergence.template.properties import TypeSchema

GROUP = "convergence.resources"


class Plugin(Protocol):
    """What the registry needs of a plugin class: its schema."""

    schema: TypeSchema


class PluginRegistry:
    """Resource types by name. Implements the template package's ``TypeCatalog``."""

    def __init__(self, plugins: Mapping[str, type[Plugin]]) -> None:
        self._plugins = dict(plugins)

    @classmethod
    def from_entry_points(cls, group: str = GROUP) -> PluginRegistry:
        found: dict[str, type[Plugin]] = {}
        for ep in entry_points(group=group):
            found[ep.name] = ep.load()
        return cls(found)

    def lookup(self, type_name: str) -> TypeSchema | None:
        plugin = self._plugins.get(type_name)
        return plugin.schema if plugin is not None else None

    def names(self) -> list[str]:
        return sorted(self._plugins)

    def plugin(self, type_name: str) -> type[Plugin] | None:
        return self._plugins.get(type_name)

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._plugins
