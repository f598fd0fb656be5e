"""Whose credentials a stack's cloud work runs with, decided when a request is accepted.

Every stack belongs to a tenant, and every cloud call its resources cause must run with
credentials of that tenant, never with the engine's own:

- ``noauth`` (a person's own engine, loopback only unless allowed): the cloud the process is
  configured with (``OS_CLOUD``), or one the request names among ``CONVERGENCE_STACK_CLOUDS``.
- ``token``: the cloud the operator mapped to the stack's project
  (``CONVERGENCE_PROJECT_CLOUDS``, chosen by the API: ``convergence.api.credentials``); a
  project with none has no cloud (:data:`~convergence.plugins.base.NO_CLOUD`).
- ``keystone``: a trust the caller gives the engine into the stack's project (the engine's
  service user as trustee, impersonating the caller); when none can be made (an admin acting
  for a project its token is not scoped to) the stack has no cloud.

A stack with no cloud may hold resources that need none (``OS::Heat::*``); a template whose
resources need a cloud its stack cannot reach is refused here (:func:`refuse_cloudless`,
a ``TemplateError`` naming the resource and the setting to configure) before anything is
stored; should one reach a step all the same (a type only a nested template or a group's
definition names), its plugin fails it, since the cloud backend refuses ``NO_CLOUD``.

Callers: ``convergence.services.stacks`` (create and update) and
``convergence.services.templates.accept``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from convergence.errors import CloudRefused
from convergence.plugins.base import (
    NO_CLOUD,
    CloudScope,
    Delegation,
    ResourceFailure,
    RetryLater,
)
from convergence.template import StackDefinition, TemplateError
from convergence.template.errors import TYPE, Path, format_path

if TYPE_CHECKING:
    from convergence.services.context import Runtime

CLOUDLESS = CloudScope(cloud=NO_CLOUD)

# The group types whose members' type is a property: where the members' type is written.
_MEMBER_TYPES = {"OS::Heat::ResourceGroup": ("resource_def", "type"),
                 "OS::Heat::AutoScalingGroup": ("resource", "type"),
                 "OS::Convergence::NodeGroup": ("resource_def", "type")}


def how_to_configure(rt: Runtime, tenant: str) -> str:
    """What an operator (token mode) or the caller (keystone mode) does so that a cloudless
    stack of ``tenant`` has a cloud."""
    if rt.settings.auth == "token":
        return (f"map project {tenant!r} to a clouds.yaml entry in "
                f"CONVERGENCE_PROJECT_CLOUDS (project=cloud,...)")
    return (f"send a token scoped to project {tenant!r}: the engine works in a stack's "
            f"project through a trust from its caller, never with its own credentials")


def _typed(definition: StackDefinition, prefix: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every resource type a definition names, with where: its resources, the members of
    its groups (a literal member type), and its nested templates' resources, recursively."""
    for name, type_name in definition.resource_types.items():
        path: Path = (*prefix, "resources", name)
        yield (*path, "type"), type_name
        member = _MEMBER_TYPES.get(type_name)
        resource = definition.template.resources.get(name)
        props = resource.properties if resource is not None else None
        if member is not None and isinstance(props, Mapping):
            inner: Any = props.get(member[0])
            if isinstance(inner, Mapping) and isinstance(inner.get(member[1]), str):
                yield (*path, "properties", *member), str(inner[member[1]])
    for name, child in definition.nested.items():
        yield from _typed(child, (*prefix, "resources", name))


def cloud_needs(rt: Runtime, definition: StackDefinition,
                scope: CloudScope) -> tuple[str, str, str] | None:
    """The first resource (path, type, why) that needs a cloud the stack of ``scope`` cannot
    reach; None when every one can (or none needs a cloud)."""
    for path, type_name in _typed(definition):
        problem = rt.registry.cloud_problem(type_name, scope)
        if problem:
            return format_path(path), type_name, problem
    return None


def refuse_cloudless(rt: Runtime, definition: StackDefinition, scope: CloudScope,
                     tenant: str | None = None, why: str | None = None) -> None:
    """Refuse a template whose resources need a cloud the stack cannot reach: a
    TemplateError at the resource's type naming what to configure; or, when the caller could
    not delegate the work into the stack's project (``why``: no token scoped to it, a trust
    Keystone would not make), ``CloudRefused`` saying so (the API's 403)."""
    found = cloud_needs(rt, definition, scope)
    if found is None:
        return
    path, type_name, problem = found
    if why is not None:
        raise CloudRefused(f"{path}: {type_name} needs a cloud, and the engine works in a "
                           f"stack's project only as its caller: {why}.")
    # A stack with no cloud of its own is told what would give it one; the process's own
    # missing cloud is named by the problem itself (``OS_CLOUD``).
    hint = f" ({how_to_configure(rt, tenant)})" if tenant is not None and scope.cloudless \
        else ""
    raise TemplateError.at(path, f"{type_name} needs a cloud, and this stack has none: "
                                 f"{problem}{hint}", TYPE)


def delegated_scope(rt: Runtime, scope: CloudScope, caller: Delegation | None,
                    ) -> tuple[CloudScope, str | None]:
    """Keystone mode: ``scope`` with the trust ``caller`` gives the engine into the stack's
    project; without a caller who can give one, the stack is cloudless (with the reason).
    The identity service unable to answer now is ``CloudRefused`` (retryable); its refusal
    makes the stack cloudless, the reason kept for the refusal of a template needing one."""
    if caller is None:
        return CLOUDLESS, ("the caller's token is not scoped to the stack's project, so no "
                           "trust into it can be made: send a token scoped to it")
    try:
        return rt.registry.delegate(scope, caller), None
    except RetryLater as exc:
        raise CloudRefused(f"The identity service cannot make the engine's trust now: {exc}",
                           retryable=True) from None
    except ResourceFailure as exc:
        return CLOUDLESS, f"the identity service refused the engine's trust: {exc}".rstrip(".")

