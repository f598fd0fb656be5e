"""Stack actions and previews of Heat's API v1, under ``/v1/{tenant_id}``.

Callers: ``convergence.api.app`` includes :data:`router` before the stack routes (whose lookup
routes would otherwise take ``stacks/preview`` and ``stacks/{name}/{id}/...`` paths).

- ``POST /stacks/{name}/{id}/actions``: a body of exactly one of ``suspend``, ``resume``,
  ``check``, ``cancel_update``, ``cancel_without_rollback`` (its value ignored); zero, several
  or unknown keys are a 400 bad request. ``cancel_update`` rolls a create or update in progress
  back to the last template that converged, for a create to nothing (``ROLLBACK_IN_PROGRESS``,
  then ``ROLLBACK_COMPLETE``; Heat refuses it on a create, which leaves a half-made stack no
  way back but a delete);
  ``cancel_without_rollback`` stops a create or update in progress where it is (the stack is
  ``CREATE_FAILED`` / ``UPDATE_FAILED`` at once). Both answer 200 with a ``null`` body, as
  Heat does, and 409 when there is nothing of that kind to cancel; both honour ``If-Match``
  (412). ``check`` looks at every resource in the cloud and changes nothing
  (``CHECK_IN_PROGRESS``, then ``CHECK_COMPLETE`` or ``CHECK_FAILED`` with each failed
  resource's reason); 200 with a ``null`` body, 409 while another request is in progress.
  ``suspend`` and ``resume`` are not done by this engine yet: 400 ``NotSupported``.
- ``POST /stacks/preview``: validates a new stack and lists the resources it would create.
- ``PUT|PATCH /stacks/{name}/{id}/preview``: what an update would do to each resource
  (``convergence.services.preview``).

The request is read with ``convergence.api.requests``; the answers are shaped here and with
``convergence.api.views``.
Each route is guarded by its Heat rule (``convergence.api.policy``): the actions route by the
rule of the action its body names (``actions:check``, ``actions:cancel_update``...), once the
body is known to name one; the previews by ``stacks:preview*`` and the ``resource_types:``
rules of the types the template uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request

from convergence.api import views
from convergence.api.auth import require_auth
from convergence.api.errors import ApiError
from convergence.api.policy import check_types, enforce, rule
from convergence.api.requests import (
    bad_request,
    base_url,
    canonical_stack,
    environments,
    flag,
    if_match_generation,
    json_body,
    mapping,
    no_template,
    runtime,
    template_text,
    wake,
)
from convergence.errors import Conflict
from convergence.heat_fields import iso
from convergence.ports.views import RecordView, StackView, TemplateContent
from convergence.runtime import Runtime
from convergence.services import inputs, preview, stacks
from convergence.template import TemplateError

router = APIRouter(prefix="/v1/{tenant_id}", dependencies=[Depends(require_auth)])

ACTIONS = ("suspend", "resume", "check", "cancel_update", "cancel_without_rollback")
CANCELS = ("cancel_update", "cancel_without_rollback")


# Actions ----------------------------------------------------------------------------------------

@router.post("/stacks/{stack_name}/{stack_id}/actions")
def stack_action(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                 body: dict[str, Any] = Depends(json_body),  # noqa: B008
                 rt: Runtime = Depends(runtime)) -> None:  # noqa: B008
    if len(body) != 1:
        raise ApiError(400, "HTTPBadRequest", "The request body must name exactly one "
                       f"action, one of: {', '.join(ACTIONS)}.")
    action = next(iter(body))
    if action not in ACTIONS:
        raise ApiError(400, "HTTPBadRequest", f"Invalid action {action!r}: must be one of "
                       f"{', '.join(ACTIONS)}.")
    enforce(request, f"actions:{action}")  # each action its rule, as in Heat
    if action not in (*CANCELS, "check"):
        raise ApiError(400, "NotSupported", f"The stack action '{action}' is not supported "
                       f"yet by this engine (Stack {stack.name}); nothing was done.")
    expected = if_match_generation(request)
    if action == "check":
        # Conflict (409) while another request is in progress, checked in the transaction.
        stacks.check_stack(rt, stack.tenant, stack.id, expected_generation=expected)
    else:
        # Conflict (409) unless a create or update is in progress, checked in the transaction.
        stacks.cancel_stack(rt, stack.tenant, stack.id, rollback=action == "cancel_update",
                            expected_generation=expected)
    wake(request)
    # Heat answers 200 with a null body; the stack's status tells how the cancel goes.


# Previews ---------------------------------------------------------------------------------------

def _content(body: Mapping[str, Any]) -> TemplateContent:
    if body.get("template") is None:
        raise no_template(body)
    files = mapping(body, "files")
    return TemplateContent(text=template_text(body["template"]), files=files,
                           environments=tuple(environments(body, files)),
                           parameters=mapping(body, "parameters"))


def _preview_resource(stack_name: str, stack_href: str, tenant: str,
                      item: preview.DesiredResource, required_by: list[str]) -> dict[str, Any]:
    return {
        "resource_name": item.name,
        "logical_resource_id": item.name,
        "resource_type": item.type,
        "resource_action": "INIT",
        "resource_status": "COMPLETE",
        "resource_status_reason": "",
        "physical_resource_id": "",
        "properties": preview.plain(item.properties),
        "attributes": {},
        "metadata": {},
        "description": "",
        "required_by": required_by,
        "stack_name": stack_name,
        "stack_identity": {"stack_name": stack_name, "stack_id": "None", "tenant": tenant,
                           "path": ""},
        "resource_identity": {"stack_name": stack_name, "stack_id": "None", "tenant": tenant,
                              "path": f"/resources/{quote(item.name, safe='')}"},
        "links": [{"href": stack_href, "rel": "stack"}],
        "creation_time": None,
        "updated_time": None,
    }


@router.post("/stacks/preview", dependencies=[rule("stacks:preview")])
def preview_create(request: Request, tenant_id: str,
                   body: dict[str, Any] = Depends(json_body),  # noqa: B008
                   rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    check_types(request, body)
    name = body.get("stack_name")
    if not isinstance(name, str) or not name:
        raise bad_request("'stack_name' is required.")
    try:
        found = preview.preview_create(rt, tenant_id, name, _content(body))
    except Conflict as exc:
        raise ApiError(409, "StackExists", str(exc)) from None
    href = f"{base_url(request)}/v1/{quote(tenant_id, safe='')}/stacks/{quote(name, safe='')}/None"
    deps = found.definition.dependencies
    required_by = {n: sorted(o for o, d in deps.items() if n in d)
                   for n in found.definition.resource_types}
    params = inputs.definition_parameters(found.definition)  # hidden ones masked
    params.update({"OS::stack_id": "None", "OS::stack_name": name, "OS::project_id": tenant_id})
    return {"stack": {
        "id": "None",
        "stack_name": name,
        "links": [{"href": href, "rel": "self"}],
        "description": found.description,
        "template_description": found.description,
        "stack_owner": None,
        "parent": None,
        "capabilities": [],
        "notification_topics": [],
        "disable_rollback": flag(body.get("disable_rollback"), False),
        "timeout_mins": body.get("timeout_mins"),
        "parameters": params,
        "creation_time": None,
        "updated_time": None,
        "deletion_time": None,
        "resources": [_preview_resource(name, href, tenant_id, r, required_by.get(r.name, []))
                      for r in found.resources],
    }}


def _change_item(base: str, stack: StackView, name: str, record: RecordView | None,
                 desired: preview.DesiredResource | None) -> dict[str, Any]:
    stack_href = views.stack_url(base, stack)
    identity = {"stack_name": stack.name, "stack_id": stack.id, "tenant": stack.tenant,
                "path": ""}
    item: dict[str, Any] = {
        "resource_name": name,
        "logical_resource_id": name,
        "resource_type": desired.type if desired is not None else
        (record.type if record is not None else ""),
        "resource_action": record.action if record is not None else "INIT",
        "resource_status": record.status if record is not None else "COMPLETE",
        "resource_status_reason": record.status_reason if record is not None else "",
        "physical_resource_id": (record.physical_id or "") if record is not None else "",
        "stack_name": stack.name,
        "stack_identity": identity,
        "resource_identity": {**identity, "path": f"/resources/{quote(name, safe='')}"},
        "creation_time": iso(record.created_at) if record is not None else None,
        "updated_time": iso(record.updated_at or record.created_at)
        if record is not None else None,
        "description": "",
        "links": [{"href": f"{stack_href}/resources/{quote(name, safe='')}", "rel": "self"},
                  {"href": stack_href, "rel": "stack"}],
    }
    if desired is not None:
        item["properties"] = preview.plain(desired.properties)
    return item


def _update_preview(request: Request, stack: StackView, rt: Runtime, body: Mapping[str, Any],
                    existing: bool) -> dict[str, Any]:
    check_types(request, body)
    template = body.get("template")
    if template is None and not existing:
        raise bad_request("No template specified")
    files = mapping(body, "files")
    try:
        found = preview.preview_update(
            rt, stack.tenant, stack.id,
            template_text(template) if template is not None else None, files=files,
            environments=environments(body, files), parameters=mapping(body, "parameters"),
            existing=existing)
    except ValueError as exc:
        if isinstance(exc, TemplateError):
            raise
        raise bad_request(str(exc)) from None
    base = base_url(request)
    return {"resource_changes": {
        bucket: [_change_item(base, stack, n, found.heads.get(n), found.desired.get(n))
                 for n in found.changes.bucket(bucket)]
        for bucket in preview.BUCKETS}}


@router.put("/stacks/{stack_name}/{stack_id}/preview", dependencies=[rule("stacks:preview_update")])
def preview_update(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                   body: dict[str, Any] = Depends(json_body),  # noqa: B008
                   rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return _update_preview(request, stack, rt, body, existing=False)


@router.patch("/stacks/{stack_name}/{stack_id}/preview",
              dependencies=[rule("stacks:preview_update_patch")])
def preview_patch(request: Request, stack: StackView = Depends(canonical_stack),  # noqa: B008
                  body: dict[str, Any] = Depends(json_body),  # noqa: B008
                  rt: Runtime = Depends(runtime)) -> dict[str, Any]:  # noqa: B008
    return _update_preview(request, stack, rt, body, existing=True)
