"""The resource registry of an environment: type mappings, hooks and restricted actions.

``environment.py`` builds a :class:`ResourceRegistry` from an environment's
``resource_registry`` section and combines those of several files with
:meth:`ResourceRegistry.merged`; ``validate.py`` resolves each resource's effective type
through :meth:`ResourceRegistry.resolve_type` and builds a nested stack's registry with
:meth:`ResourceRegistry.nested`; :meth:`ResourceRegistry.hooks_for` and
:meth:`ResourceRegistry.restricted_actions_for` are what the engine asks before acting on a
resource. :meth:`ResourceRegistry.template_mappings` and
:meth:`ResourceRegistry.template_files` list the template files the mappings name.

The rules are Heat's (``heat/engine/environment.py``), with one deliberate divergence: merged
per-resource ``resources`` sections merge deeply (see ``environment.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from convergence.template.errors import ENVIRONMENT, TemplateError
from convergence.template.files import is_template_reference

# Beyond this many hops a chain of mappings is a wildcard feeding itself ("OS::*": "OS::X::*").
MAX_MAPPING_CHAIN = 50
_NO_HOOKS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ResourceSection:
    """The registry's settings for the resources whose names match one key of ``resources``.

    ``mappings`` map types for those resources only (None: a mapping removed); ``hooks`` and
    ``restricted_actions`` are None when not set (so that merging can tell "not set" from
    "set to nothing"); ``children`` are the sections for the resources of the nested stack
    such a resource creates.
    """

    mappings: Mapping[str, str | None] = field(default_factory=dict)
    hooks: frozenset[str] | None = None
    restricted_actions: frozenset[str] | None = None
    children: Mapping[str, ResourceSection] = field(default_factory=dict)

    def merged(self, later: ResourceSection) -> ResourceSection:
        """This section with a later one over it: later keys win, children merge deeply."""
        return ResourceSection(
            mappings=_merge_mappings(self.mappings, later.mappings),
            hooks=later.hooks if later.hooks is not None else self.hooks,
            restricted_actions=(later.restricted_actions if later.restricted_actions is not None
                                else self.restricted_actions),
            children=_merge_sections(self.children, later.children),
        )


@dataclass(frozen=True, slots=True)
class ResourceRegistry:
    """Type mappings for the whole stack, and per-resource settings under ``resources``.

    A global mapping maps a type to another type (an alias, ``OS::Heat::None`` to disable a
    feature), to a template file, or, with a key ending in ``*``, every type with that prefix
    (``"OS::Networking::*": "OS::Neutron::*"``, or many to one). A None value records a removed
    mapping, which removes earlier ones when registries are merged.
    """

    mappings: Mapping[str, str | None] = field(default_factory=dict)
    resources: Mapping[str, ResourceSection] = field(default_factory=dict)
    base_url: str | None = None  # heatclient's key for relative template paths; kept, unused

    def resolve_type(self, resource_name: str, type_name: str, *,
                     known: Callable[[str], bool] | None = None) -> str:
        """The type ``resource_name`` really gets: a plugin type or a template file.

        Follows the resource's own mappings, then global ones, through chains of aliases, in
        Heat's order of preference (per-resource first; then exact and wildcard keys in
        sorted order, in which ``OS::Nova::*`` sorts before ``OS::Nova::Server``). When
        ``known`` is given, a mapping whose chain ends at an unknown type is passed over for
        the next, as Heat passes over one that finds no implementation. A cycle of mappings
        raises TemplateError.
        """
        chain = self._resolve(resource_name, type_name, (), known)
        if chain is None:
            chain = self._resolve(resource_name, type_name, (), None)
        assert chain is not None  # without ``known`` every chain ends somewhere
        return chain[-1]

    def _resolve(self, resource_name: str, type_name: str, seen: tuple[str, ...],
                 known: Callable[[str], bool] | None) -> tuple[str, ...] | None:
        chain = (*seen, type_name)
        if type_name in seen:
            raise TemplateError.at(("resource_registry",), "type mappings form a cycle: "
                                   + " -> ".join(chain), ENVIRONMENT)
        if len(chain) > MAX_MAPPING_CHAIN:
            raise TemplateError.at(("resource_registry",), f"mapping '{seen[0]}' goes through "
                                   f"more than {MAX_MAPPING_CHAIN} types; a wildcard mapping "
                                   "probably matches its own result", ENVIRONMENT)
        if is_template_reference(type_name):
            return chain  # a template is what it is (Heat: a key naming a template maps to it)
        for candidate in self._candidates(resource_name, type_name):
            found = self._resolve(resource_name, candidate, chain, known)
            if found is not None:
                return found
        return chain if known is None or known(type_name) else None

    def _candidates(self, resource_name: str, type_name: str) -> list[str]:
        out: list[str] = []
        section = self.resources.get(resource_name)  # exact name: globs are for hooks only
        own = section.mappings.get(type_name) if section is not None else None
        if own is not None:
            out.append(own)
        ranked: list[tuple[str, str]] = []
        for key, value in self.mappings.items():
            if value is None:
                continue
            if key == type_name:
                ranked.append((key, value))
            elif key.endswith("*") and not is_template_reference(value) \
                    and type_name != value and type_name.startswith(key[:-1]):
                new = value[:-1] + type_name[len(key) - 1:] if value.endswith("*") else value
                ranked.append((key, new))
        out.extend(new for _, new in sorted(ranked))
        return out

    def _matching(self, resource_name: str) -> Iterable[ResourceSection]:
        # Heat matches resources keys as fnmatch patterns on the name, case-sensitively.
        return (s for key, s in self.resources.items() if fnmatchcase(resource_name, key))

    def hooks_for(self, resource_name: str) -> frozenset[str]:
        """The hooks set on the resource by every ``resources`` key matching its name."""
        if not self.resources:
            return _NO_HOOKS
        return frozenset().union(*(s.hooks or () for s in self._matching(resource_name)))

    def restricted_actions_for(self, resource_name: str) -> frozenset[str]:
        """The actions (``update``, ``replace``) refused for the resource."""
        return frozenset().union(*(s.restricted_actions or ()
                                   for s in self._matching(resource_name)))

    def nested(self, resource_name: str, type_name: str | None = None) -> ResourceRegistry:
        """The registry of the nested stack that resource ``resource_name`` creates.

        As Heat's ``get_child_environment``: the global mappings pass down; the nested
        sections of every ``resources`` key matching the name become the child's
        ``resources`` (the exact name last, so it wins). Given the resource's ``type_name``,
        the global mapping that made it a template resource is left out, so that a template
        standing in for a type may itself use the type it replaces.
        """
        children: dict[str, ResourceSection] = {}
        for key, section in self.resources.items():
            if fnmatchcase(resource_name, key):
                children.update(section.children)
        exact = self.resources.get(resource_name)
        if exact is not None:
            children.update(exact.children)
        mappings = dict(self.mappings)
        if type_name is not None:
            try:
                chain = self._resolve(resource_name, type_name, (), None) or (type_name,)
            except TemplateError:
                chain = (type_name,)  # reported where the resource's type is resolved
            if len(chain) >= 2 and is_template_reference(chain[-1]):
                key, template = chain[-2], chain[-1]
                own = self.resources.get(resource_name)
                by_resource = own is not None and own.mappings.get(key) == template
                if not by_resource and mappings.get(key) == template:
                    del mappings[key]
        return ResourceRegistry(mappings, children, self.base_url)

    def template_mappings(self) -> dict[str, str]:
        """Global mappings whose target is a template file (a name or URL), by type."""
        return {k: v for k, v in self.mappings.items()
                if v is not None and is_template_reference(v)}

    def template_files(self) -> frozenset[str]:
        """Every template file the registry names, per-resource and nested sections included."""
        found = set(self.template_mappings().values())
        todo = list(self.resources.values())
        while todo:
            section = todo.pop()
            found.update(v for v in section.mappings.values()
                         if v is not None and is_template_reference(v))
            todo.extend(section.children.values())
        return frozenset(found)

    def merged(self, later: ResourceRegistry) -> ResourceRegistry:
        """This registry with a later one over it.

        Later mappings win and a later null removes an earlier mapping (with a ``*`` key,
        every mapping with that prefix), as when heatclient merges files and Heat loads the
        result. Per-resource sections merge deeply (see the module notes: Heat's server-side
        merge replaces the whole ``resources`` map).
        """
        return ResourceRegistry(
            mappings=_merge_mappings(self.mappings, later.mappings),
            resources=_merge_sections(self.resources, later.resources),
            base_url=later.base_url if later.base_url is not None else self.base_url,
        )


def _merge_mappings(old: Mapping[str, str | None],
                    new: Mapping[str, str | None]) -> dict[str, str | None]:
    out = dict(old)
    for key, value in new.items():
        if value is None and key.endswith("*"):
            for existing in [k for k in out if k.startswith(key[:-1])]:
                del out[existing]
        out.pop(key, None)  # re-insert so that order follows the latest file
        out[key] = value
    return out


def _merge_sections(old: Mapping[str, ResourceSection],
                    new: Mapping[str, ResourceSection]) -> dict[str, ResourceSection]:
    out = dict(old)
    for name, section in new.items():
        out[name] = out[name].merged(section) if name in out else section
    return out
