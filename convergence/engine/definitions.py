"""Validated stack definitions by template id: parsed once per process, not once per step.

Templates are immutable and content-addressed, so a definition never goes stale; the cache is
bounded so that a long-running worker does not keep every template it ever saw.

Callers: the engine's context (:mod:`convergence.engine.context` holds the cache its parts and
the services read), and the services (``convergence.services.templates`` and ``.preview``:
:func:`build_definition` of a request's template).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping

from convergence.ports.views import TemplateContent
from convergence.template import (
    Problems,
    StackDefinition,
    TypeCatalog,
    parse_environment,
    validate_stack,
)
from convergence.template.common_constraints import COMMON_CONSTRAINTS
from convergence.template.constraints import CustomConstraints
from convergence.template.model import Template
from convergence.template.parse import parse_collecting
from convergence.template.source import Limits


def build_definition(content: TemplateContent, catalog: TypeCatalog,
                     limits: Limits | None = None,
                     custom_constraints: CustomConstraints = COMMON_CONSTRAINTS,
                     max_nesting: int | None = None) -> StackDefinition:
    """Validate stored content into a definition (raises TemplateError if it is invalid).

    ``custom_constraints``: the use cases pass the cloud's when they accept a request; the
    engine rebuilding an accepted template checks only the common ones (no cloud call)."""
    problems = Problems()
    envs = [parse_environment(doc, f"environment[{i}]", problems)
            for i, doc in enumerate(content.environments)]
    problems.raise_if_any()
    limits = limits or Limits(max_bytes=max(len(content.text.encode()) + 1, 1024 * 1024))
    if max_nesting is not None:
        limits = dataclasses.replace(limits, max_nesting=max_nesting)
    # Parsed once per text: the nested stacks of a group share one template and differ by
    # their parameters only, which validation (not parsing) reads.
    parsed = PARSED.get(content.text, content.files, limits)
    definition = validate_stack(parsed if parsed is not None else content.text,
                                catalog=catalog, environments=envs,
                                parameters=dict(content.parameters),
                                files=dict(content.files), limits=limits,
                                custom_constraints=custom_constraints)
    if content.scaling:
        definition = dataclasses.replace(definition, scaling=dict(content.scaling))
    return definition


class ParsedTemplates:
    """Templates parsed without problems, by what parsing reads (the text, the files, the
    limits): bounded, shared by the threads of a process. A text with problems is not kept
    (validation parses it again, to report them).

    Held weakly: a parsed template lives as long as a definition built from it (the
    :class:`DefinitionCache` decides which), so that the nested stacks of a group, built one
    after the other, share one parse, and a template of a million resources that its stack
    has moved on from is not kept here after its definition is dropped."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[tuple[str, str, Limits], weakref.ref[Template]] = \
            OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, text: str, files: Mapping[str, str], limits: Limits) -> Template | None:
        key = (hashlib.sha256(text.encode()).hexdigest(), _files_digest(files), limits)
        with self._lock:
            ref = self._items.get(key)
            found = ref() if ref is not None else None
            if found is not None:
                self._items.move_to_end(key)
                return found
        problems = Problems()
        parsed = parse_collecting(text, problems, files=dict(files), limits=limits)
        if parsed is None or problems:
            return None
        with self._lock:
            self._items[key] = weakref.ref(parsed)  # (a dead one is a miss)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return parsed


def _files_digest(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for key in sorted(files):
        digest.update(key.encode())
        digest.update(b"\0")
        digest.update(str(files[key]).encode())
        digest.update(b"\0")
    return digest.hexdigest()


PARSED = ParsedTemplates()


class DefinitionCache:
    def __init__(self, load: Callable[[str], TemplateContent], catalog: TypeCatalog,
                 size: int = 512) -> None:
        self._load = load
        self._catalog = catalog
        self._size = size
        self._items: OrderedDict[str, StackDefinition] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, template_id: str,
            load: Callable[[str], TemplateContent] | None = None) -> StackDefinition:
        """The definition of a template; ``load`` reads it within the caller's transaction
        (a second connection could wait on the caller's own lock)."""
        with self._lock:
            found = self._items.get(template_id)
            if found is not None:
                self._items.move_to_end(template_id)
                return found
        definition = build_definition((load or self._load)(template_id), self._catalog)
        self.put(template_id, definition)
        return definition

    def put(self, template_id: str, definition: StackDefinition) -> None:
        with self._lock:
            self._items[template_id] = definition
            self._items.move_to_end(template_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def forget(self, template_id: str) -> None:
        """Drop a definition now rather than when it is the least recently used: one its
        stack has moved on from (a group's template of a million members weighs a GiB).
        Whoever needs it again builds it again."""
        with self._lock:
            self._items.pop(template_id, None)

    def __contains__(self, template_id: object) -> bool:
        with self._lock:
            return template_id in self._items
