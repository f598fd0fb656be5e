"""The ``files`` map a client sends with a template: lookups by name, relative to a location.

Heat looks ``get_file`` names and template-resource types up in the ``files`` map exactly as
written. Clients (heatclient, our CLI) put every file a template refers to into that map; when
they key files by their path relative to a root, a nested template's relative references
(``../fragments/x.sh``) are found by resolving them against the nested template's own key. The
server's disk is never read.

Callers: ``parse`` and ``resolve`` (``get_file``), ``validate`` and ``registry`` (template
resources), and the CLI's ``files`` module, which builds the map with the same keys.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

TEMPLATE_SUFFIXES = (".yaml", ".yml", ".template", ".json")


@functools.lru_cache(maxsize=4096)
def is_template_reference(type_name: str) -> bool:
    """Whether a resource type names a template (a nested stack) rather than a plugin.
    Remembered per name: a stack asks it of every resource, of a few types."""
    if type_name.endswith(TEMPLATE_SUFFIXES):
        return True
    return urlsplit(type_name).scheme in ("http", "https", "file")


def file_key(files: Mapping[str, str], name: str, location: str | None) -> str | None:
    """The key under which ``name``, referred to from ``location``, is in ``files``."""
    if name in files:
        return name
    if location is None:
        return None
    if urlsplit(location).scheme:
        candidate = urljoin(location, name)
    else:
        candidate = posixpath.normpath(posixpath.join(posixpath.dirname(location), name))
    return candidate if candidate in files else None
