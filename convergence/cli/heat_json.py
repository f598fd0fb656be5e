"""Heat's JSON as the CLI's values: stacks and events as views, resources as rows, errors.

Callers: ``convergence.cli.remote`` (the API client of remote mode), which reads every answer
through these functions so that the output layer prints them as in embedded mode: stacks and
events become :class:`StackView` and :class:`EventView`, resources the dicts
``output.resource_fields`` / ``output.resource_detail`` produce. An error answer (Heat's error
JSON) becomes a :class:`RemoteError`: one ``Error:`` line per line of its message, exit code 1.
It also holds how the environments go into a request's body and how the events watch stream
(Server-Sent Events) is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

import click

from convergence.cli.client import STACK_TYPE
from convergence.ports.views import EventView, StackView

if TYPE_CHECKING:
    import httpx


class RemoteError(click.ClickException):
    """An error answered by the API (or no answer at all): each line of it as ``Error:``."""

    def __init__(self, message: str, *, code: int | None = None,
                 type_: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.type = type_

    @property
    def lines(self) -> list[str]:
        return [line for line in self.message.splitlines() if line.strip()] or [self.message]

    def show(self, file: IO[Any] | None = None) -> None:
        for line in self.lines:
            click.echo(f"Error: {line}", err=True)


def _ts(value: Any) -> float | None:
    """Heat's ``2024-05-01T12:00:00Z`` as a POSIX timestamp."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _split_status(value: Any) -> tuple[str, str]:
    """``CREATE_IN_PROGRESS`` -> (``CREATE``, ``IN_PROGRESS``) (actions have no underscore)."""
    text = str(value or "")
    action, _, status = text.partition("_")
    return action, status


def stack_view(data: Mapping[str, Any], tenant: str) -> StackView:
    """A stack of Heat's JSON (list or show) as the store's view."""
    action, status = _split_status(data.get("stack_status"))
    outputs: dict[str, Any] = {}
    for item in data.get("outputs") or []:
        value: dict[str, Any] = {"value": item.get("output_value"),
                                 "description": item.get("description") or ""}
        if item.get("output_error"):
            value["error"] = item["output_error"]
        outputs[str(item.get("output_key"))] = value
    generation = int(data.get("generation") or 0)
    return StackView(
        id=str(data.get("id")), name=str(data.get("stack_name")), tenant=tenant,
        generation=generation,
        observed_generation=int(data.get("observed_generation") or generation),
        traversal_id=None, template_id=None, rollback_template_id=None,
        action=action, status=status,
        status_reason=str(data.get("stack_status_reason") or ""), outputs=outputs,
        timeout_mins=data.get("timeout_mins"),
        disable_rollback=bool(data.get("disable_rollback", False)),  # rollback is the default
        created_at=_ts(data.get("creation_time")) or 0.0,
        updated_at=_ts(data.get("updated_time")) or _ts(data.get("creation_time")) or 0.0,
        deleted_at=_ts(data.get("deletion_time")))


def event_view(data: Mapping[str, Any], stack: StackView, kind: str | None = None) -> EventView:
    """An event of Heat's JSON as the store's view (stack-level ones typed OS::Heat::Stack)."""
    action, status = _split_status(data.get("resource_status"))
    name = str(data.get("resource_name") or "")
    physical = str(data.get("physical_resource_id") or "") or None
    is_stack = kind == "stack.status" if kind is not None else \
        (name == stack.name and physical == stack.id)
    return EventView(
        id=int(data.get("id") or 0), stack_id=stack.id,
        generation=int(data.get("generation") or 0), resource_name=name,
        physical_resource_id=physical,
        resource_type=STACK_TYPE if is_stack else str(data.get("resource_type") or ""),
        action=action, status=status, reason=str(data.get("resource_status_reason") or ""),
        created_at=_ts(data.get("event_time")) or 0.0)


_RESOURCE_KEYS = ("resource_name", "physical_resource_id", "resource_type", "resource_status",
                  "resource_status_reason", "updated_time")
_RESOURCE_DETAIL_KEYS = ("logical_resource_id", "creation_time", "required_by", "attributes")


def resource_fields(data: Mapping[str, Any], *, detail: bool = False) -> dict[str, Any]:
    """A resource of Heat's JSON with the keys ``output.resource_fields`` (or ``_detail``) has."""
    keys = _RESOURCE_KEYS + (_RESOURCE_DETAIL_KEYS if detail else ())
    return {k: data.get(k) for k in keys}


def environment_body(envs: Sequence[Any]) -> dict[str, Any]:
    """Environments in order: all but the last as files named in ``environment_files``."""
    body: dict[str, Any] = {}
    if not envs:
        return body
    extra = {f"environment-{i}.json": json.dumps(env) for i, env in enumerate(envs[:-1])}
    if extra:
        body["environment_files"] = list(extra)
        body["files_extra"] = extra
    body["environment"] = envs[-1]
    return body


def sse_messages(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event type, data) of each Server-Sent Events message; comments and retries skipped."""
    kind, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield kind, "\n".join(data)
            kind, data = "message", list[str]()
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)


def api_error(response: httpx.Response) -> RemoteError:
    """Heat's error JSON (``error.message``) as a RemoteError; else the status line."""
    message, type_ = "", None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            message = str(error.get("message") or "")
            type_ = str(error.get("type") or "") or None
        message = message or str(body.get("explanation") or body.get("title") or "")
    if not message:
        message = f"{response.status_code} {response.reason_phrase}"
    return RemoteError(message, code=response.status_code, type_=type_)
