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

from convergence.plugins.base import (
    DEFAULT_SCOPE,
    BackendFactory,
    CloudScope,
    ConstraintCheck,
    Delegation,
    PluginHost,
)
from convergence.template.common_constraints import COMMON_CONSTRAINTS, Layered
from convergence.template.constraints import CustomConstraints
from convergence.template.files import is_template_reference
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

    def custom_constraints(self, scope: CloudScope = DEFAULT_SCOPE,
                           caller: Delegation | None = None) -> CustomConstraints:
        """The custom constraints validation checks a template with: the common ones
        (addresses, DNS names...) and those the plugins know (``nova.flavor``...), checked
        against the cloud of ``scope`` through this registry's backends (as ``caller`` sees
        it, with the caller's token, when given: a backend that can). Each value is checked
        once per object returned (make one per validation)."""
        checks: dict[str, ConstraintCheck] = {}
        for _, plugin in sorted(self._plugins.items()):
            checks.update(getattr(plugin, "constraints", {}))
        backends: Mapping[str, Any] = self.backends
        if caller is not None:
            backends = {name: backend.as_caller(caller) if hasattr(backend, "as_caller")
                        else backend for name, backend in self.backends.items()}
        return Layered(COMMON_CONSTRAINTS, _PluginConstraints(checks, backends, scope))

    def delegate(self, scope: CloudScope, caller: Delegation) -> CloudScope:
        """``scope`` with the trust the cloud backend made for ``caller`` (the cloud's
        refusal raises, as the backend translates it); unchanged without such a backend."""
        for backend in self.backends.values():
            delegate = getattr(backend, "delegate", None)
            if delegate is not None:
                return delegate(scope, caller)  # type: ignore[no-any-return]
        return scope

    def release(self, scope: CloudScope) -> None:
        """Give back what :meth:`delegate` made (the trust), once the stack is gone."""
        if scope.trust_id is None:
            return
        for backend in self.backends.values():
            release = getattr(backend, "release", None)
            if release is not None:
                release(scope)

    def cloud_problem(self, type_name: str, scope: CloudScope) -> str | None:
        """Why a resource of ``type_name`` could not reach its cloud in a stack of ``scope``
        (None: it can, or it needs none): asked of the backends its plugin declared that
        reach a cloud (those with a ``cloud_problem``)."""
        plugin = self._plugins.get(type_name)
        declared: Mapping[str, Any] = getattr(plugin, "backends", {}) if plugin else {}
        for name in declared:
            problem = getattr(self.backends.get(name), "cloud_problem", None)
            found = problem(scope) if problem is not None else None
            if found:
                return str(found)
        return None

    def scope_problem(self, scope: CloudScope) -> str | None:
        """Why a stack could not use ``scope`` (a cloud no backend knows), or None."""
        for backend in self.backends.values():
            problem = getattr(backend, "scope_problem", None)
            found = problem(scope) if problem is not None else None
            if found:
                return str(found)
        return None

    def lookup(self, type_name: str) -> TypeSchema | None:
        plugin = self._plugins.get(type_name)
        return plugin.schema if plugin is not None else None

    def names(self) -> list[str]:
        return sorted(self._plugins)

    def plugin(self, type_name: str) -> type[Plugin] | None:
        """The plugin of a type; for a type naming a template file, the template resource's
        (a nested stack of that file)."""
        found = self._plugins.get(type_name)
        if found is None and is_template_reference(type_name):
            from convergence.plugins.heat.nested import TemplateResource

            return TemplateResource  # type: ignore[return-value]  # a ClassVar schema
        return found

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._plugins


class _PluginConstraints:
    """The plugins' constraint checks bound to backends and a stack's cloud, each value
    checked once."""

    __slots__ = ("_backends", "_checks", "_scope", "_seen")

    def __init__(self, checks: Mapping[str, ConstraintCheck], backends: Mapping[str, Any],
                 scope: CloudScope) -> None:
        self._checks, self._backends, self._scope = checks, backends, scope
        self._seen: dict[tuple[str, str], str | None] = {}

    def check(self, name: str, value: Any) -> str | None:
        check = self._checks.get(name)
        if check is None:
            return None
        key = (name, repr(value))
        if key not in self._seen:
            self._seen[key] = check(self._backends, self._scope, value)
        return self._seen[key]

    def known(self, name: str) -> bool:
        return name in self._checks
