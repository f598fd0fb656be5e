"""A stored template's secrets: the values of its hidden parameters, sealed where they are kept.

Callers: ``stacks.py`` (``put_template`` seals, ``template`` opens) and ``rekeying.py``
(everything sealed again with the newest key). A template's content holds a hidden parameter's
value in up to three places: its ``parameters`` (the request's), its environments'
``parameters`` and ``parameter_defaults``, and the text of an environment file in its
``files`` map (``environment_files``, as Heat's clients send them). The first two are sealed
member by member (``store/sealing.py``), a file that holds such a value whole. The template's
text is left as it is (a hidden parameter's default is the template author's, as in Heat), as
are ``shown_parameters`` (masked) and the content's id (the hash of the content in clear).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from convergence.ports.views import TemplateContent
from convergence.store.sealing import SEALED, Sealer, opened

_ENV_SECTIONS = ("parameters", "parameter_defaults")


def sealed_content(sealer: Sealer, content: TemplateContent,
                   hidden: Collection[str]) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """The ``parameters``, ``environments`` and ``files`` columns of ``content`` with the
    values of the ``hidden`` parameters sealed."""
    parameters, environments, files = dict(content.parameters), \
        list(content.environments), dict(content.files)
    if not hidden:
        return parameters, environments, files
    values = [parameters[n] for n in hidden if n in parameters]
    sealed_envs: list[Any] = []
    for doc in environments:
        if isinstance(doc, Mapping):
            doc = dict(doc)
            for section in _ENV_SECTIONS:
                given = doc.get(section)
                if isinstance(given, Mapping):
                    values.extend(given[n] for n in hidden if n in given)
                    doc[section] = sealer.seal_members(given, hidden)
        sealed_envs.append(doc)
    texts = [v if isinstance(v, str) else json.dumps(v) for v in values]
    holding = [name for name, text in files.items()
               if isinstance(text, str) and any(t and t in text for t in texts)]
    return sealer.seal_members(parameters, hidden), sealed_envs, \
        sealer.seal_members(files, holding)


def opened_content(sealer: Sealer, row: Any) -> TemplateContent:
    """A ``templates`` row as content, its hidden values opened (one written in clear before
    encryption reads as it is)."""
    parameters, environments, files = _opened_columns(sealer, row)
    return TemplateContent(row.text, files, environments, parameters, row.scaling or {})


def resealed_columns(sealer: Sealer, row: Any, hidden: Iterable[str]) -> dict[str, Any]:
    """The columns of a stored template to write again: its sealed values sealed with the
    newest key, and those of ``hidden`` parameters found in clear sealed (empty: nothing to
    write). The row's text is not needed."""
    parameters, environments, files = _opened_columns(sealer, row)
    content = TemplateContent("", files, environments, parameters)
    names = frozenset(hidden) | _sealed_names(sealer, row)
    sealed = sealed_content(sealer, content, names)
    columns = {"parameters": sealed[0], "environments": sealed[1], "files": sealed[2]}
    return {k: v for k, v in columns.items() if v != (getattr(row, k) or type(v)())}


def _opened_columns(sealer: Sealer, row: Any
                    ) -> tuple[dict[str, Any], tuple[Any, ...], dict[str, Any]]:
    return (opened(sealer, row.parameters or {}),
            tuple(_opened_environment(sealer, doc) for doc in row.environments or ()),
            opened(sealer, row.files or {}))


def _opened_environment(sealer: Sealer, doc: Any) -> Any:
    if not isinstance(doc, Mapping) or not any(
            isinstance(doc.get(s), Mapping) and SEALED in doc[s] for s in _ENV_SECTIONS):
        return doc
    return {k: opened(sealer, v) if k in _ENV_SECTIONS else v for k, v in doc.items()}


def _sealed_names(sealer: Sealer, row: Any) -> frozenset[str]:
    """The parameters a row keeps sealed already (their names are inside the seals)."""
    names: set[str] = set()
    sections = [row.parameters or {}]
    sections.extend(doc.get(s) for doc in row.environments or () if isinstance(doc, Mapping)
                    for s in _ENV_SECTIONS)
    for section in sections:
        if isinstance(section, Mapping) and SEALED in section:
            names.update(k for k in sealer.open_members(section) if k not in section)
    return frozenset(names)
