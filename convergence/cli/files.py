"""What a client sends with a template: the files it references, and nothing else.

Callers: ``convergence.cli.common.read_input`` (``stack create|update``, their
``--dry-run`` previews, the demo) and ``convergence template validate``, in embedded and remote
mode alike. As heatclient's
``template_utils`` does, :func:`sent_files` follows references recursively and reads only what
they name: ``get_file`` arguments and template resource types (``type: nested.yaml``, wherever a
``type`` key names a template, as in a resource group's definition) in the template, in the
templates those name, and in files fetched by ``get_file`` that are templates themselves; and
the templates an environment's ``resource_registry`` maps types to (top level, per resource,
relative to the environment file or to its ``base_url``). Keys, credentials and dotfiles next to
a template stay on the client unless a template names them. A referenced file that is missing,
not UTF-8 text, binary or over ``MAX_FILE_BYTES`` refuses the input (TemplateError), naming
the referencing file, the place in it and the reference.

Keys follow the server's lookup (``convergence.template.files.file_key``): a name exactly as
written, else resolved against the referencing file's own key. The top template is sent without
a key (``template validate`` in embedded mode gives it one), so its references are keyed as
written, relative to its folder; a nested template's references are keyed relative to the
nested template's key, as the server resolves them. Environment mappings are rewritten to keys
relative to the root folder (``--files-dir``, by default the template's). ``file://`` URLs and
absolute paths are read and keyed as written. ``http(s)`` references are not fetched: they are
left as written, and the server refuses what the files map lacks.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import click

from convergence.template import Problems, TemplateError, format_path, load_document
from convergence.template.errors import FILE, PathItem
from convergence.template.files import file_key, is_template_reference

MAX_FILES = 5000
MAX_FILE_BYTES = 1024 * 1024
GET_FILE, TEMPLATE = "get_file", "template"
# Registry keys whose values are never template files.
_REGISTRY_SETTINGS = frozenset({"base_url", "hooks", "restricted_actions"})


def root_folder(template: Path | None, env_files: Sequence[Path],
                files_dir: Path | None) -> Path:
    """The folder the files map's keys are relative to: ``--files-dir``, else the template's
    folder, else the first environment's."""
    if files_dir is not None:
        return files_dir
    if template is not None:
        return template.parent
    return env_files[0].parent if env_files else Path(".")


def key_for(path: Path, root: Path) -> str:
    """The files-map key of a file on disk: its path relative to the root (``../`` outside)."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix()


def sent_files(template: Path | None, source: str | bytes | None, env_files: Sequence[Path],
               root: Path, *, location: str | None = None) -> tuple[dict[str, str], list[Any]]:
    """The files map for ``template`` (its text is ``source``) and ``env_files``, and the
    environments with their template mappings rewritten to the map's keys.

    ``location`` is the template's key when it is sent with one. A template that does not
    parse is sent as it is (the server reports why); a referenced file that cannot be sent
    raises TemplateError, with every such reference.
    """
    walk = _Walk(root)
    if template is not None and source is not None:
        document = _template(source, location or template.name, TEMPLATE)
        if document is not None:
            walk.scan(document, template, location)
    environments = [walk.environment(load_document(p.read_bytes(), p.name), p)
                    for p in env_files]
    walk.finish()
    return walk.files, environments


def rebase_registry(env: Any, env_path: Path, root: Path) -> Any:
    """An environment with its template mappings rewritten from env-relative paths to keys
    relative to ``root``, reading nothing (for tools that send a whole tree of files)."""
    def key(value: str, where: str) -> str:
        target = _mapping_target(value, env_path, root)
        return value if target is None else target[0]

    return _rewrite_registry(env, env_path, key)


def parse_params(values: Sequence[str]) -> dict[str, str]:
    """``-P key=value`` options as a map (values stay strings: the template gives types)."""
    params: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise click.UsageError(f"-P expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        params[key.strip()] = value
    return params


# Following references ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Reference:
    """``name`` as written at ``where``; the server looks it up from ``location`` as ``key``."""

    where: str
    what: str
    name: str
    location: str | None
    key: str


class _Walk:
    """The files read so far, by key, and the references that led to them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, str] = {}
        self.sources: dict[str, Path] = {}  # key -> the file read for it
        self.references: list[_Reference] = []
        self.problems = Problems()
        self._todo: deque[tuple[Any, Path, str]] = deque()
        self._full = False

    def scan(self, document: Any, origin: Path, location: str | None) -> None:
        """Follow the references of one template, then of what they name, breadth first."""
        self._scan(document, origin, location)
        self._drain()

    def _drain(self) -> None:
        while self._todo:
            self._scan(*self._todo.popleft())

    def _scan(self, document: Any, origin: Path, location: str | None) -> None:
        for path, what, name in _references(document):
            where = f"{origin}: {format_path(path)}"
            target = _target(name, origin, location)
            if target is not None:
                key, file = target
                self.references.append(_Reference(where, what, name, location, key))
                self._add(key, file, what, name, where)

    def environment(self, env: Any, env_file: Path) -> Any:
        """Read the templates the environment maps types to; rewrite the mappings to keys."""
        def follow(value: str, where: str) -> str:
            target = _mapping_target(value, env_file, self.root)
            if target is None:
                return value
            key, file = target
            self._add(key, file, TEMPLATE, value, where)
            self._drain()
            return key

        return _rewrite_registry(env, env_file, follow)

    def _add(self, key: str, file: Path, what: str, name: str, where: str) -> None:
        known = self.sources.get(key)
        if known is not None:
            if os.path.abspath(known) != os.path.abspath(file):
                self._problem(where, what, name, f"would be sent as '{key}', the key of "
                              f"{known} already; rename one of them")
            return
        if len(self.files) >= MAX_FILES:
            if not self._full:
                self._full = True
                self._problem(where, what, name, f"more than {MAX_FILES} files are referenced")
            return
        text, why = _read(file)
        if text is None:
            self._problem(where, what, name, why)
            return
        self.files[key] = text
        self.sources[key] = file
        document = _template(text, key, what)
        if document is not None:
            self._todo.append((document, file, key))

    def finish(self) -> None:
        """Check that the server finds each reference where it was put, then raise problems.

        The server tries a name as written before resolving it against the referencing
        file's key, so a nested template's ``x.sh`` is the top folder's ``x.sh`` when both
        are sent.
        """
        for ref in self.references:
            if ref.key not in self.files:
                continue
            found = file_key(self.files, ref.name, ref.location)
            if found is not None and found != ref.key and \
                    os.path.abspath(self.sources[found]) != os.path.abspath(self.sources[ref.key]):
                self._problem(ref.where, ref.what, ref.name, f"would be read on the server as "
                              f"'{found}' ({self.sources[found]}), not {self.sources[ref.key]}; "
                              "rename one of them or write the path differently")
        self.problems.raise_if_any()

    def _problem(self, where: str, what: str, name: str, why: str) -> None:
        label = f"get_file: '{name}'" if what == GET_FILE else f"template '{name}'"
        self.problems.add(where, f"{label}: {why}", FILE)


def _references(node: Any, path: tuple[PathItem, ...] = ()) -> Iterator[
        tuple[tuple[PathItem, ...], str, str]]:
    """``(path, what, name)`` of every ``get_file`` and template ``type`` in a document, in
    document order (as heatclient, anywhere: a resource group's definition names one too)."""
    if isinstance(node, dict):
        for k, value in node.items():
            here = (*path, k if isinstance(k, str) else str(k))
            if k == GET_FILE and isinstance(value, str):
                yield here, GET_FILE, value
            elif k == "type" and isinstance(value, str) and is_template_reference(value):
                yield here, TEMPLATE, value
            else:
                yield from _references(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _references(value, (*path, i))


def _target(name: str, origin: Path, location: str | None) -> tuple[str, Path] | None:
    """The key the server looks ``name`` up under from ``location``, and the file it names
    relative to ``origin``; None for what is not read here (URLs other than ``file://``)."""
    if urlsplit(name).scheme == "file":
        return name, Path(unquote(urlsplit(name).path))
    if "://" in name:
        return None
    if os.path.isabs(name):
        return name, Path(os.path.normpath(name))
    file = Path(os.path.normpath(os.path.join(os.path.dirname(origin), name)))
    if location is None:
        return name, file
    if urlsplit(location).scheme:
        return urljoin(location, name), file
    return posixpath.normpath(posixpath.join(posixpath.dirname(location), name)), file


def _mapping_target(value: str, env_file: Path, root: Path) -> tuple[str, Path] | None:
    """The key and file of an environment mapping (already joined to any ``base_url``)."""
    if urlsplit(value).scheme == "file" or os.path.isabs(value):
        return _target(value, env_file, None)
    if "://" in value:
        return None
    file = Path(os.path.normpath(os.path.join(os.path.dirname(env_file), value)))
    return key_for(file, root), file


def _rewrite_registry(env: Any, env_file: Path, rewrite: Callable[[str, str], str]) -> Any:
    """The environment with each template mapping of its registry replaced by
    ``rewrite(value, where)``; a ``base_url`` is joined to the relative values below it."""
    if not isinstance(env, dict) or not isinstance(env.get("resource_registry"), dict):
        return env

    def section(mappings: Mapping[Any, Any], path: tuple[PathItem, ...],
                base: str | None) -> dict[Any, Any]:
        if isinstance(mappings.get("base_url"), str):
            base = mappings["base_url"]
        out: dict[Any, Any] = {}
        for k, value in mappings.items():
            here = (*path, k if isinstance(k, str) else str(k))
            if isinstance(value, dict):
                out[k] = section(value, here, base)
            elif isinstance(value, str) and k not in _REGISTRY_SETTINGS \
                    and is_template_reference(value):
                out[k] = rewrite(_with_base(base, value), f"{env_file}: {format_path(here)}")
            else:
                out[k] = value
        return out

    return {**env, "resource_registry": section(env["resource_registry"],
                                                ("resource_registry",), None)}


def _with_base(base: str | None, value: str) -> str:
    if base is None or "://" in value or os.path.isabs(value):
        return value
    if "://" in base:
        return urljoin(base.rstrip("/") + "/", value)
    return os.path.join(base, value)


# Reading -------------------------------------------------------------------------------------

def _read(file: Path) -> tuple[str | None, str]:
    """The file's text, or None and why it cannot be sent."""
    try:
        info = file.stat()
        if stat.S_ISDIR(info.st_mode):
            return None, f"{file} is a folder, not a file"
        if not stat.S_ISREG(info.st_mode):
            return None, f"{file} is not a regular file"
        if info.st_size > MAX_FILE_BYTES:
            return None, f"{file} is larger than {MAX_FILE_BYTES} bytes"
        with file.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None, f"no such file: {file}"
    except OSError as exc:
        return None, f"{file} cannot be read: {exc.strerror or exc}"
    if len(data) > MAX_FILE_BYTES:
        return None, f"{file} is larger than {MAX_FILE_BYTES} bytes"
    if b"\0" in data:
        return None, f"{file} is binary, not text"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"{file} is not UTF-8 text (byte {exc.start})"


def _template(source: str | bytes, what: str, kind: str) -> Any:
    """The document to follow references in: a template named as one (``kind`` TEMPLATE)
    that parses, or a ``get_file`` text that is a template; else None (the server judges)."""
    if kind != TEMPLATE:
        text = source if isinstance(source, str) else ""
        if "heat_template_version" not in text:
            return None
    try:
        data = load_document(source, what)
    except TemplateError:
        return None
    if not isinstance(data, dict) or (kind != TEMPLATE and "heat_template_version" not in data):
        return None
    return data
