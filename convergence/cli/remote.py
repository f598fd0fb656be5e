"""The CLI's remote mode: the stack commands talk to a ``convergence api`` (or Heat) over HTTP.

Callers: ``convergence.cli.state.CliState.remote`` builds one :class:`RemoteClient` per
invocation when ``--url`` (or ``CONVERGENCE_URL``) is given; ``convergence.cli.stack_cmd`` and
``convergence.cli.template_cmd`` then call it instead of ``convergence.services``.

The client speaks Heat's orchestration API v1 under ``<url>/v1/<tenant>`` with httpx, sending
``CONVERGENCE_TOKEN`` as ``X-Auth-Token``. Stacks and events come back as the store's
:class:`StackView` and :class:`EventView` (built from Heat's JSON) so that the output layer
prints them as in embedded mode; resources come back as the dicts ``output.resource_fields`` /
``output.resource_detail`` produce, and the other answers as the CLI shows them (it is one
of the two implementations of ``convergence.cli.backend.Backend``). Waiting (``--wait``,
``event list --follow``) reads the events watch stream (Server-Sent Events,
``GET .../events?watch=true``): no polling.

Errors the API answers (Heat's error JSON) raise :class:`RemoteError`: one ``Error:`` line per
line of the message, exit code 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import quote

import click
import httpx

from convergence.cli import output as out
from convergence.cli.listing import ResourceListing, cut
from convergence.stack_pages import StackQuery
from convergence.store.views import EventView, StackView

STACK_TYPE = "OS::Heat::Stack"
TERMINAL = ("COMPLETE", "FAILED")
TIMEOUT = 30.0  # seconds for an ordinary request
STREAM_READ_TIMEOUT = 120.0  # the stream sends a keepalive every 15 s


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


def is_settled(s: StackView) -> bool:
    return s.status in TERMINAL and s.observed_generation == s.generation


@dataclass(frozen=True, slots=True)
class Progress:
    """What the watch stream told so far: the stack and each resource's latest status."""

    stack: StackView
    resources: Mapping[str, str] = field(default_factory=dict)  # name -> status


def _environment_body(envs: Sequence[Any]) -> dict[str, Any]:
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


class RemoteClient:
    """Heat's orchestration API v1 for one tenant, as the CLI's commands need it."""

    def __init__(self, url: str, tenant: str, token: str | None = None, *,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.tenant = tenant
        headers = {"Accept": "application/json", "User-Agent": "convergence-cli"}
        if token:
            headers["X-Auth-Token"] = token
        self._http = httpx.Client(base_url=f"{self.url}/v1/{quote(tenant, safe='')}",
                                  headers=headers, timeout=TIMEOUT, follow_redirects=True,
                                  transport=transport)

    def close(self) -> None:
        self._http.close()

    # Plumbing ----------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RemoteError(f"{self.url}: {exc or type(exc).__name__}") from None
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        if not response.content:
            return {}
        try:
            return response.json()
        except ValueError:
            raise RemoteError(f"{self.url}: not a JSON answer to {method} {path}") from None

    @staticmethod
    def _path(s: StackView) -> str:
        return f"/stacks/{quote(s.name, safe='')}/{quote(s.id, safe='')}"

    def _body(self, text: str | None, files: Mapping[str, str], envs: Sequence[Any],
              parameters: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if text is not None:
            body["template"] = text
        env = _environment_body(envs)
        all_files = {**files, **env.pop("files_extra", {})}
        if all_files:
            body["files"] = all_files
        body.update(env)
        if parameters:
            body["parameters"] = dict(parameters)
        return body

    # Stacks ------------------------------------------------------------------------------

    def get_stack(self, name_or_id: str) -> StackView:
        data = self._json("GET", f"/stacks/{quote(name_or_id, safe='')}")
        return stack_view(data["stack"], self.tenant)

    def create_stack(self, name: str, text: str, *, files: Mapping[str, str],
                     environments: Sequence[Any], parameters: Mapping[str, Any],
                     timeout_mins: int | None, disable_rollback: bool) -> StackView:
        body = self._body(text, files, environments, parameters)
        body.update(stack_name=name, disable_rollback=disable_rollback)
        if timeout_mins is not None:
            body["timeout_mins"] = timeout_mins
        data = self._json("POST", "/stacks", json=body)
        return self.get_stack(str(data["stack"]["id"]))

    def update_stack(self, name: str, text: str | None, *, files: Mapping[str, str] | None,
                     environments: Sequence[Any], parameters: Mapping[str, Any] | None,
                     existing: bool, timeout_mins: int | None,
                     disable_rollback: bool | None = None) -> StackView:
        """``disable_rollback`` None: not sent, the stack keeps its setting."""
        current = self.get_stack(name)
        body = self._body(text, files or {}, environments, parameters or {})
        if timeout_mins is not None:
            body["timeout_mins"] = timeout_mins
        if disable_rollback is not None:
            body["disable_rollback"] = disable_rollback
        self._json("PATCH" if existing else "PUT", self._path(current), json=body)
        return self.get_stack(current.id)

    def cancel_stack(self, s: StackView, *, rollback: bool = True) -> StackView:
        """Heat's ``cancel_update`` (``rollback``) or ``cancel_without_rollback`` action."""
        action = "cancel_update" if rollback else "cancel_without_rollback"
        self._request("POST", f"{self._path(s)}/actions", json={action: None})
        return self.get_stack(s.id)

    def delete_stack(self, name: str) -> StackView:
        current = self.get_stack(name)
        self._request("DELETE", self._path(current))
        try:
            return self.get_stack(current.id)
        except RemoteError as exc:
            if exc.code != 404:
                raise
            return replace(current, action="DELETE", status="COMPLETE")

    def last_event_id(self, s: StackView) -> int:
        data = self._json("GET", f"{self._path(s)}/events",
                          params={"sort_dir": "desc", "limit": 1})
        events = data.get("events") or []
        return int(events[0]["id"]) if events else 0

    # Under a stack -----------------------------------------------------------------------

    def show_resource(self, s: StackView, resource_name: str) -> dict[str, Any]:
        data = self._json("GET", f"{self._path(s)}/resources/{quote(resource_name, safe='')}")
        return resource_fields(data["resource"], detail=True)

    def list_events(self, s: StackView, after: int = 0,
                    query: Mapping[str, Any] | None = None) -> list[EventView]:
        """The stack's events after the id ``after``, or the page of Heat's event list that
        ``query`` (its query string) asks for."""
        params: dict[str, Any] = {"sort_dir": "asc"}
        if after:
            params["marker"] = after
        if query is not None:
            params = dict(query)
        data = self._json("GET", f"{self._path(s)}/events", params=params)
        return [event_view(e, s) for e in data.get("events", [])]

    def show_output(self, s: StackView, key: str) -> dict[str, Any]:
        data = self._json("GET", f"{self._path(s)}/outputs/{quote(key, safe='')}")
        return dict(data["output"])

    # What a stack was made from ----------------------------------------------------------

    def stack_rows(self, query: StackQuery) -> list[dict[str, Any]]:
        """A page of the stack list, rows as ``stack list`` shows them."""
        params: dict[str, Any] = {"sort_dir": "desc" if query.descending else "asc",
                                  "sort_keys": list(query.sort_keys),
                                  **{k: list(v) for k, v in query.filters.items()}}
        if query.limit is not None:
            params["limit"] = query.limit
        if query.marker:
            params["marker"] = query.marker
        if query.include_deleted:
            params["show_deleted"] = "true"
        data = self._json("GET", "/stacks", params=params)
        return [out.stack_row(stack_view(s, self.tenant), str(s.get("description") or ""))
                for s in data.get("stacks", [])]

    def stack_detail(self, s: StackView) -> dict[str, Any]:
        """The stack as ``stack show`` shows it: with its description and parameters."""
        data = self._json("GET", self._path(s))["stack"]
        return out.stack_detail(stack_view(data, self.tenant),
                                description=str(data.get("description") or ""),
                                parameters=data.get("parameters") or {})

    def stack_template(self, s: StackView) -> dict[str, Any]:
        return dict(self._json("GET", f"{self._path(s)}/template"))

    def stack_environment(self, s: StackView) -> dict[str, Any]:
        return dict(self._json("GET", f"{self._path(s)}/environment"))

    def stack_files(self, s: StackView) -> dict[str, Any]:
        return dict(self._json("GET", f"{self._path(s)}/files"))

    def preview_create(self, name: str, text: str, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       timeout_mins: int | None, disable_rollback: bool) -> dict[str, Any]:
        """``POST /stacks/preview``: the would-be stack (``output.create_preview``)."""
        body = self._body(text, files, environments, parameters)
        body.update(stack_name=name, disable_rollback=disable_rollback)
        if timeout_mins is not None:
            body["timeout_mins"] = timeout_mins
        return out.create_preview(self._json("POST", "/stacks/preview", json=body)["stack"])

    def preview_update(self, s: StackView, text: str | None, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       existing: bool) -> dict[str, Any]:
        """``PUT|PATCH .../preview``: what the update would do (``output.update_preview``)."""
        body = self._body(text, files, environments, parameters)
        answer = self._json("PATCH" if existing else "PUT", f"{self._path(s)}/preview",
                            json=body)
        return out.update_preview(answer.get("resource_changes") or {})

    # Resources and their types -----------------------------------------------------------

    def resource_rows(self, s: StackView, listing: ResourceListing) -> list[dict[str, Any]]:
        """The stack's resources: filtered by the API (Heat's filters), sorted and cut here
        (Heat's resource list has no order or limit)."""
        data = self._json("GET", f"{self._path(s)}/resources", params=listing.query())
        rows = []
        for r in data.get("resources", []):
            row = resource_fields(r)
            if listing.with_detail or listing.nested_depth:
                row["stack_name"] = r.get("stack_name") or s.name
            rows.append(row)
        return [dict(r) for r in cut(rows, listing)]

    def nested_stack(self, s: StackView, resource_name: str) -> StackView | None:
        """The stack a resource stands for (Heat links it as ``nested``), None if none."""
        data = self._json("GET", f"{self._path(s)}/resources/{quote(resource_name, safe='')}")
        links = data.get("resource", {}).get("links") or []
        href = next((link.get("href") for link in links if link.get("rel") == "nested"), None)
        if not href:
            return None
        try:
            return self.get_stack(str(href).rstrip("/").rsplit("/", 1)[-1])
        except RemoteError as exc:
            if exc.code == 404:  # a failed nested resource whose stack is gone
                return None
            raise

    def mark_resource(self, s: StackView, resource: str, *, unhealthy: bool,
                      reason: str) -> None:
        """``PATCH .../resources/{name}``: mark it unhealthy (CHECK_FAILED), or healthy."""
        self._request("PATCH", f"{self._path(s)}/resources/{quote(resource, safe='')}",
                      json={"mark_unhealthy": unhealthy, "resource_status_reason": reason})

    def resource_types(self, *, name: str | None, support_status: str | None,
                       with_description: bool) -> list[dict[str, Any]]:
        params = {k: v for k, v in (("name", name), ("support_status", support_status))
                  if v}
        if with_description:
            params["with_description"] = "true"
        data = self._json("GET", "/resource_types", params=params)
        return [dict(t) if isinstance(t, Mapping) else {"resource_type": str(t)}
                for t in data.get("resource_types", [])]

    def resource_type(self, type_name: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/resource_types/{quote(type_name, safe='')}"))

    def resource_type_template(self, type_name: str, template_type: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/resource_types/{quote(type_name, safe='')}/template",
                               params={"template_type": template_type}))

    def validate_template(self, text: str, *, files: Mapping[str, str],
                          environments: Sequence[Any],
                          parameters: Mapping[str, Any] | None) -> dict[str, Any]:
        body = self._body(text, files, environments, parameters or {})
        result: dict[str, Any] = self._json("POST", "/validate", json=body)
        return result

    # The watch stream --------------------------------------------------------------------

    def watch(self, s: StackView, after: int) -> Iterator[EventView]:
        """The stack's events after the id ``after``, as they happen (forever)."""
        timeout = httpx.Timeout(TIMEOUT, read=STREAM_READ_TIMEOUT)
        try:
            with self._http.stream("GET", f"{self._path(s)}/events",
                                   params={"watch": "true", "marker": after},
                                   headers={"Accept": "text/event-stream"},
                                   timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _api_error(response)
                for kind, data in _sse(response.iter_lines()):
                    yield event_view(json.loads(data), s, kind)
        except httpx.HTTPError as exc:
            raise RemoteError(f"{self.url}: {exc or type(exc).__name__}") from None

    def wait(self, s: StackView, after: int,
             on_event: Callable[[EventView, Progress], None] | None = None) -> StackView:
        """Follow the stream from the event id ``after`` until the stack's latest request
        finished; ``on_event`` sees every event. Returns the stack as it ended."""
        resources: dict[str, str] = {}
        stack = s

        def seen(e: EventView) -> None:
            nonlocal stack
            if e.resource_type == STACK_TYPE:
                stack = replace(stack, action=e.action, status=e.status, status_reason=e.reason)
            else:
                resources[e.resource_name] = f"{e.action}_{e.status}"
            if on_event is not None:
                on_event(e, Progress(stack, dict(resources)))

        if is_settled(s):  # already over: show what happened, without waiting
            for e in self.list_events(s, after):
                seen(e)
            return s
        for e in self.watch(s, after):
            seen(e)
            if e.resource_type == STACK_TYPE and e.status in TERMINAL:
                try:
                    current = self.get_stack(s.id)
                except RemoteError as exc:
                    if exc.code == 404 and e.action == "DELETE":
                        return stack  # gone: deleted
                    raise
                if is_settled(current):
                    return current
        return stack  # pragma: no cover - the stream only ends when the server goes


def _sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
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


def _api_error(response: httpx.Response) -> RemoteError:
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
