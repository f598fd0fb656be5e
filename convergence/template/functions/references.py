"""Functions that read data from outside the call: parameters, resources, files, the facade.

``get_resource`` and ``get_attr`` (and their CFN twins ``Ref`` and ``Fn::GetAtt``) are also
what dependencies are made of: each declares the resource it targets, which the parser records
so that the dependency graph is built without another walk of the template.

``versions`` places them in each version's table; the parser calls ``check`` (which asks its
:class:`CheckContext` whether the name exists) and the resolver calls ``evaluate`` (which asks
its :class:`Resolver` for the value).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from convergence.template.errors import FUNCTION, REFERENCE, Path
from convergence.template.functions.base import (
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    shape_error,
)

PSEUDO_PARAMETERS = frozenset(
    {"OS::stack_name", "OS::stack_id", "OS::project_id",
     "AWS::StackName", "AWS::StackId", "AWS::Region"}
)
FACADE_KEYS = ("metadata", "deletion_policy", "update_policy")


def walk_path(value: Any, components: Sequence[Any]) -> Any:
    """Follow a get_param/get_attr path; like Heat, a path that does not exist gives ''."""
    for key in components:
        if isinstance(value, Mapping):
            if not isinstance(key, str | int) or key not in value:
                return ""
            value = value[key]
        elif isinstance(value, list | tuple) and not isinstance(value, str):
            try:
                value = value[int(key)]
            except (ValueError, TypeError, IndexError):
                return ""
        else:
            return ""
    return value


# get_param ---------------------------------------------------------------------------------

def _param_args(args: Any) -> tuple[Any, list[Any]] | None:
    if isinstance(args, str):
        return args, []
    if isinstance(args, list) and args:
        return args[0], args[1:]
    return None


def _check_get_param(call: Call, ctx: CheckContext) -> None:
    parsed = _param_args(call.args)
    if parsed is None:
        if not isinstance(call.args, Call):
            shape_error(ctx, call, "a parameter name or a list [name, path...]")
        return
    name, _ = parsed
    if isinstance(name, Call):
        return
    if not isinstance(name, str):
        ctx.error(call.path, "get_param: the parameter name must be a string", FUNCTION)
    elif name not in PSEUDO_PARAMETERS and not ctx.has_parameter(name):
        ctx.error(call.path, f"get_param: parameter '{name}' is not defined", REFERENCE)


def _get_param(call: Call, res: Resolver) -> Any:
    args = res.resolve(call.args)
    parsed = _param_args(args)
    if parsed is None or not isinstance(parsed[0], str):
        raise fail(call, "arguments must be a parameter name or a list [name, path...]")
    name, path = parsed
    return walk_path(res.parameter(name, call.path), path)


GET_PARAM = FunctionDef("get_param", _get_param, _check_get_param)


# get_resource / Ref ------------------------------------------------------------------------

def _resource_target(call: Call) -> str | None:
    return call.args if isinstance(call.args, str) else None


def _check_get_resource(call: Call, ctx: CheckContext) -> None:
    if not isinstance(call.args, str):
        shape_error(ctx, call, "a resource name")
    elif not ctx.has_resource(call.args):
        ctx.error(call.path, f"{call.name}: resource '{call.args}' is not defined", REFERENCE)


def _get_resource(call: Call, res: Resolver) -> Any:
    if not isinstance(call.args, str):
        raise fail(call, "the argument must be a resource name")
    return res.reference(call.args, call.path)


GET_RESOURCE = FunctionDef("get_resource", _get_resource, _check_get_resource,
                           target=_resource_target)


def _check_ref(call: Call, ctx: CheckContext) -> None:
    name = call.args
    if not isinstance(name, str):
        shape_error(ctx, call, "a parameter or resource name")
    elif not (ctx.has_resource(name) or ctx.has_parameter(name) or name in PSEUDO_PARAMETERS):
        ctx.error(call.path, f"Ref: '{name}' is neither a parameter nor a resource", REFERENCE)


def _ref(call: Call, res: Resolver) -> Any:
    if not isinstance(call.args, str):
        raise fail(call, "the argument must be a parameter or resource name")
    return res.reference(call.args, call.path)


# The resolver decides between parameter and resource: it knows which names are which.
REF = FunctionDef("Ref", _ref, _check_ref, target=_resource_target)


# get_attr / Fn::GetAtt ----------------------------------------------------------------------

def _attr_target(call: Call) -> str | None:
    args = call.args
    if isinstance(args, list) and args and isinstance(args[0], str):
        return args[0]
    return None


def _make_check_get_attr(min_args: int) -> Any:
    def check(call: Call, ctx: CheckContext) -> None:
        args = call.args
        if not isinstance(args, list) or len(args) < min_args:
            form = "[resource, attribute, path...]" if min_args == 2 else \
                "[resource] or [resource, attribute, path...]"
            shape_error(ctx, call, f"a list {form}")
            return
        name = args[0]
        if not isinstance(name, str):
            ctx.error(call.path, f"{call.name}: the resource name must be a string", FUNCTION)
            return
        if not ctx.has_resource(name):
            ctx.error(call.path, f"{call.name}: resource '{name}' is not defined", REFERENCE)
            return
        if len(args) > 1:
            ctx.check_attribute(name, args[1], call.path, args[2:])

    return check


def _get_attr(call: Call, res: Resolver) -> Any:
    args = call.args
    if not isinstance(args, list) or not args or not isinstance(args[0], str):
        raise fail(call, "arguments must be a list [resource, attribute, path...]")
    resource = args[0]
    if len(args) == 1:
        return res.all_attributes(resource, call.path)
    name = res.resolve(args[1])
    if not isinstance(name, str):
        raise fail(call, "the attribute name must be a string")
    value = res.attribute(resource, name, call.path)
    if value is None:
        return ""
    return walk_path(value, res.resolve(args[2:]))


GET_ATTR = FunctionDef("get_attr", _get_attr, _make_check_get_attr(2), target=_attr_target)
GET_ATTR_ALL = FunctionDef("get_attr", _get_attr, _make_check_get_attr(1), target=_attr_target)


def _check_fn_getatt(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, list) or len(args) != 2:
        shape_error(ctx, call, "a list [resource, attribute]")
        return
    _make_check_get_attr(2)(call, ctx)


FN_GETATT = FunctionDef("Fn::GetAtt", _get_attr, _check_fn_getatt, target=_attr_target)


# get_file -----------------------------------------------------------------------------------

def _check_get_file(call: Call, ctx: CheckContext) -> None:
    if isinstance(call.args, Call):
        return
    if not isinstance(call.args, str):
        shape_error(ctx, call, "a file name from the files map")
        return
    ctx.check_file(call.args, call.path)


def _get_file(call: Call, res: Resolver) -> Any:
    key = res.resolve(call.args)
    if not isinstance(key, str):
        raise fail(call, "the argument must be a file name")
    return res.file(key, call.path)


GET_FILE = FunctionDef("get_file", _get_file, _check_get_file)


# resource_facade ----------------------------------------------------------------------------

def _check_facade(call: Call, ctx: CheckContext) -> None:
    if call.args not in FACADE_KEYS:
        shape_error(ctx, call, "one of " + ", ".join(FACADE_KEYS))


def _facade(call: Call, res: Resolver) -> Any:
    key = res.resolve(call.args)
    if key not in FACADE_KEYS:
        raise fail(call, "the argument must be one of " + ", ".join(FACADE_KEYS))
    return res.facade(key, call.path)


RESOURCE_FACADE = FunctionDef("resource_facade", _facade, _check_facade)
FN_RESOURCE_FACADE = FunctionDef("Fn::ResourceFacade", _facade, _check_facade)


# Fn::GetAZs ---------------------------------------------------------------------------------

def _get_azs(call: Call, res: Resolver) -> Any:
    return res.availability_zones()


FN_GETAZS = FunctionDef("Fn::GetAZs", _get_azs)


def attribute_path(call: Call) -> Path:
    """Where the attribute name of a get_attr call sits, for error messages."""
    return (*call.path, 1)
