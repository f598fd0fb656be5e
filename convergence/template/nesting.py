"""What a nested stack is made of: the template, files, environment and parameters a parent
hands the child stack one of its resources makes.

A template resource (a type naming a template file, directly or through the environment's
``resource_registry``) makes a child stack of that file; its properties are the child's
parameters. As Heat's ``get_child_environment``, the child gets the parent's
``parameter_defaults`` and a registry of the global mappings (less the one that made this
resource a template, so that a template standing in for a type may use that type) and of the
nested sections of the ``resources`` keys matching the resource's name. Files keyed by a path
relative to a root are re-keyed relative to the child's own place, so that the child's
relative references find them as they did from the parent.

Callers: the engine's step (:mod:`convergence.engine.step`), which hands a template
resource's :class:`ChildTemplate` to its plugin, and the plugins of ``OS::Heat::Stack`` and
the groups (``convergence.plugins.heat``), which build theirs from their properties. Pure.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from convergence.template.files import file_key, is_template_reference
from convergence.template.registry import ResourceRegistry, ResourceSection
from convergence.template.validate import StackDefinition

# The property under which the engine hands a group the ``get_attr`` paths the template reads
# of it (:func:`attribute_paths`): recorded with its properties, so a new one updates it.
ATTRIBUTE_PATHS = "_attribute_paths"
# ... and the group's resolved ``update_policy`` (how its members change: rolling, batches).
UPDATE_POLICY = "_update_policy"
# ... and the size the autoscaler set it to (``StackDefinition.scaling``), if any.
CAPACITY = "_capacity"


@dataclass(frozen=True, slots=True)
class ChildTemplate:
    """A child stack's desired state: one template document, the files it may refer to, one
    environment document and its parameter values. ``generated``: the engine wrote the text
    (a group's members), so it is not held to the size limit of what a user may send; the
    number of resources in the tree bounds it (``max_tree_resources``)."""

    text: str
    files: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    parameters: Mapping[str, Any] = field(default_factory=dict)
    generated: bool = False

    def digest(self) -> str:
        """What the child is made from, parameters left out: a template resource records
        it among its properties, so that a change of the file updates the child."""
        return _digest(self.text, self.files, self.environment)


def _digest(text: str, files: Mapping[str, str], environment: Mapping[str, Any]) -> str:
    body = json.dumps({"text": text, "files": dict(files), "environment": environment},
                      sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()


class _Cache:
    """The child of each template resource of recently used definitions, parameters left
    out (building one re-keys every file and hashes them all: once per definition)."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[tuple[int, str], tuple[StackDefinition, ChildTemplate,
                                                        str]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, definition: StackDefinition, name: str) -> tuple[ChildTemplate, str]:
        key = (id(definition), name)
        with self._lock:
            found = self._items.get(key)
            if found is not None and found[0] is definition:
                self._items.move_to_end(key)
                return found[1], found[2]
        child = _build(definition, name)
        digest = child.digest()
        with self._lock:
            # The definition is kept with its entry: its id is not reused while cached.
            self._items[key] = (definition, child, digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return child, digest


_CACHE = _Cache()


def template_child(definition: StackDefinition, name: str,
                   parameters: Mapping[str, Any]) -> ChildTemplate:
    """The child stack template resource ``name`` of ``definition`` makes, with these
    parameter values (its resolved properties)."""
    child, _ = _CACHE.get(definition, name)
    return ChildTemplate(child.text, child.files, child.environment, dict(parameters))


def template_digest(definition: StackDefinition, name: str) -> str:
    """:meth:`ChildTemplate.digest` of template resource ``name`` (cached)."""
    return _CACHE.get(definition, name)[1]


def group_context(definition: StackDefinition, name: str) -> ChildTemplate:
    """What a resource that generates its child's template (a group) hands that child: the
    parent's files and the child's environment, no template text (the plugin writes it)."""
    child, _ = _CACHE.get(definition, name)
    return child


def attribute_paths(definition: StackDefinition, name: str) -> list[list[Any]]:
    """The literal ``get_attr`` paths the template reads of resource ``name``, each the
    attribute and the path after it, sorted, once each: what a group's child must offer as
    outputs."""
    found = {(use.attribute, *use.rest) for use in definition.template.attribute_uses
             if use.resource == name}
    return [list(p) for p in sorted(found, key=lambda p: [str(x) for x in p])]


def _build(definition: StackDefinition, name: str) -> ChildTemplate:
    template = definition.template
    if is_template_reference(definition.resource_types[name]):
        key = file_key(template.files, definition.resource_types[name], template.location)
        if key is None:  # validation refuses a template resource whose file is missing
            raise KeyError(definition.resource_types[name])
        text, files = template.files[key], relative_files(template.files, key)
    else:  # a group: its template is generated, beside the parent's
        text, files = "", dict(template.files)
        if template.location:
            files = relative_files(files, template.location)
    env = definition.environment
    registry = env.resource_registry.nested(name, template.resources[name].type)
    document: dict[str, Any] = {}
    if env.parameter_defaults:
        document["parameter_defaults"] = dict(env.parameter_defaults)
    registry_doc = registry_document(registry)
    if registry_doc:
        document["resource_registry"] = registry_doc
    return ChildTemplate(text, files, document)


def relative_files(files: Mapping[str, str], location: str) -> dict[str, str]:
    """``files`` as a template at ``location`` refers to them: paths relative to a root
    re-keyed relative to the template's folder (URLs, and absolute paths, stay as they
    are)."""
    folder = posixpath.dirname(location)
    if not folder or urlsplit(location).scheme or location.startswith("/"):
        return dict(files)
    out: dict[str, str] = {}
    for key, text in files.items():
        if urlsplit(key).scheme or key.startswith("/"):
            out[key] = text
        else:
            out[posixpath.relpath(key, folder)] = text
    return out


def registry_document(registry: ResourceRegistry) -> dict[str, Any]:
    """A registry as an environment's ``resource_registry`` section."""
    doc: dict[str, Any] = dict(registry.mappings)
    if registry.resources:
        doc["resources"] = {name: _section_document(section)
                            for name, section in registry.resources.items()}
    if registry.base_url is not None:
        doc["base_url"] = registry.base_url
    return doc


def _section_document(section: ResourceSection) -> dict[str, Any]:
    doc: dict[str, Any] = dict(section.mappings)
    if section.hooks is not None:
        doc["hooks"] = sorted(section.hooks)
    if section.restricted_actions is not None:
        doc["restricted_actions"] = sorted(section.restricted_actions)
    for name, child in section.children.items():
        doc[name] = _section_document(child)
    return doc
