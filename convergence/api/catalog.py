"""What the engine offers, as Heat's API lists it: resource types, template versions, build info.

Callers: ``convergence.api.app`` includes :data:`router` (under ``/v1/{tenant_id}``).

- ``GET /resource_types`` (``name``, ``support_status``, ``with_description``),
  ``GET /resource_types/{type}`` (Heat's property/attribute schema) and
  ``GET /resource_types/{type}/template`` (a HOT template that exposes the type as a template
  resource: one parameter per property, one output per attribute), from the plugin registry
  in the shapes ``convergence.plugins.type_schemas`` gives.
- ``GET /template_versions`` and ``GET /template_versions/{version}/functions``
  (``with_condition_func``), from ``convergence.template.versions``.
- ``GET /build_info``.

Each route names its Heat rule (``convergence.api.policy``); the resource types shown are
those the caller may use (Heat's ``resource_types:<type>`` rules: a flavor, a quota, a volume
type... are an admin's), and another's type answers 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter, Depends, Request

from convergence.api.auth import require_auth
from convergence.api.errors import ApiError
from convergence.api.policy import forbidden, rule, type_allowed
from convergence.errors import NotFound
from convergence.plugins import type_schemas
from convergence.plugins.registry import PluginRegistry
from convergence.template.functions.base import FunctionDef
from convergence.template.versions import VERSIONS, TemplateVersion, lookup_version

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])

HOT_PREFIX = "heat_template_version."

# One line for the functions whose definition carries no ``doc``.
_DESCRIPTIONS = {
    "get_param": "A function for resolving parameter references.",
    "get_resource": "A function for resolving resource references.",
    "get_attr": "A function for resolving resource attributes.",
    "get_file": "A function for including a file inline.",
    "resource_facade": "A function for retrieving data in a parent provider template.",
    "list_join": "A function for joining a list of strings with a delimiter.",
    "str_replace": "A function for performing string substitutions.",
    "str_replace_strict": "Like str_replace, but an error when a parameter is not found.",
    "str_replace_vstrict": "Like str_replace_strict, but an error on empty parameters too.",
    "str_split": "A function for splitting a string into a list.",
    "digest": "A function for performing digest operations.",
    "repeat": "A function for iterating over a list of items.",
    "map_merge": "A function for merging maps.",
    "map_replace": "A function for performing substitutions on maps.",
    "yaql": "A function for executing a YAQL expression.",
    "if": "A function to return corresponding value based on condition evaluation.",
    "equals": "A function for comparing whether two values are equal.",
    "not": "A function that acts as a NOT operator on a condition.",
    "and": "A function that acts as an AND operator on conditions.",
    "or": "A function that acts as an OR operator on conditions.",
    "filter": "A function for filtering out values from lists.",
    "make_url": "A function for performing substitutions on maps.",
    "list_concat": "A function for extending lists.",
    "list_concat_unique": "A function for extending lists with unique items.",
    "contains": "A function for checking whether specific value is in sequence.",
}


def registry(request: Request) -> PluginRegistry:
    found: PluginRegistry = request.app.state.runtime.registry
    return found


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("true", "1", "yes", "on")


def _package_version() -> str:
    try:
        return version("convergence")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


# Resource types ---------------------------------------------------------------------------------

@router.get("/resource_types", dependencies=[rule("stacks:list_resource_types")])
def list_resource_types(request: Request, name: str | None = None,
                        support_status: str | None = None,
                        with_description: str | None = None, version: str | None = None,
                        reg: PluginRegistry = Depends(registry)  # noqa: B008
                        ) -> dict[str, Any]:
    # Only the types the caller may use (the resource_types: rules), as Heat lists them.
    names = [n for n in type_schemas.list_types(reg, name=name, support_status=support_status)
             if type_allowed(request, n)]
    if _flag(with_description):
        return {"resource_types": type_schemas.described_types(reg, names)}
    return {"resource_types": names}


@router.get("/resource_types/{type_name}", dependencies=[rule("stacks:resource_schema")])
def show_resource_type(request: Request, type_name: str,
                       reg: PluginRegistry = Depends(registry)  # noqa: B008
                       ) -> dict[str, Any]:
    _may_use(request, type_name)
    return type_schemas.type_schema(type_schemas.schema_or_404(reg, type_name))


@router.get("/resource_types/{type_name}/template", dependencies=[rule("stacks:generate_template")])
def resource_type_template(request: Request, type_name: str, template_type: str = "hot",
                           reg: PluginRegistry = Depends(registry)  # noqa: B008
                           ) -> dict[str, Any]:
    _may_use(request, type_name)
    type_schemas.schema_or_404(reg, type_name)
    if template_type.lower() != "hot":
        raise ApiError(400, "NotSupported", f"Template type {template_type} is not "
                       "supported; only hot templates are generated.")
    return type_schemas.template_of(reg, type_name)


def _may_use(request: Request, type_name: str) -> None:
    """Heat's ``resource_types:<type>`` rule: 403 for a type the caller may not use."""
    if not type_allowed(request, type_name):
        raise forbidden(f"resource_types:{type_name}")


# Template versions ------------------------------------------------------------------------------

def version_item(v: TemplateVersion) -> dict[str, Any]:
    return {"version": HOT_PREFIX + v.name, "type": "hot",
            "aliases": [HOT_PREFIX + v.alias] if v.alias else []}


def _version_or_404(value: str) -> TemplateVersion:
    key = value[len(HOT_PREFIX):] if value.startswith(HOT_PREFIX) else value
    found = lookup_version(key)
    if found is None:
        raise NotFound(f"The template version ({value}) could not be found.")
    return found


def _is_removed(fn: FunctionDef) -> bool:
    return fn.extra.get("removed", False) is True


def _describe(fn: FunctionDef) -> str:
    doc = fn.doc.strip().splitlines()[0] if fn.doc.strip() else ""
    return doc or _DESCRIPTIONS.get(fn.name, f"The {fn.name} function.")


def function_items(functions: Mapping[str, FunctionDef]) -> list[dict[str, str]]:
    return [{"functions": name, "description": _describe(fn)}
            for name, fn in sorted(functions.items()) if not _is_removed(fn)]


@router.get("/template_versions", dependencies=[rule("stacks:list_template_versions")])
def list_template_versions() -> dict[str, Any]:
    return {"template_versions": [version_item(v) for v in VERSIONS]}


@router.get("/template_versions/{template_version}/functions",
            dependencies=[rule("stacks:list_template_functions")])
def list_template_functions(template_version: str, with_condition_func: str | None = None
                            ) -> dict[str, Any]:
    v = _version_or_404(template_version)
    items = function_items(v.functions)
    if _flag(with_condition_func):
        seen = {i["functions"] for i in items}
        items += [i for i in function_items(v.condition_functions)
                  if i["functions"] not in seen]
    return {"template_functions": items}


# Build info -------------------------------------------------------------------------------------

@router.get("/build_info", dependencies=[rule("build_info:build_info")])
def build_info() -> dict[str, Any]:
    revision = _package_version()
    return {"api": {"revision": revision}, "engine": {"revision": revision}}
