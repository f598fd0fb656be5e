"""The CLI's remote mode: the commands talk to a ``convergence api`` (or Heat) over HTTP.

Callers: ``convergence.cli.state.CliState.remote`` builds one :class:`RemoteClient` per
invocation when ``--url`` (or ``CONVERGENCE_URL``) is given, and
``convergence.cli.client.open_client`` hands it to the commands: it is one of the two
implementations of ``convergence.cli.client.StackClient`` (the other is
``convergence.cli.local.LocalClient``). Only this module, ``heat_json`` and the light CLI
modules are imported in remote mode: no store, engine or use case.

The client speaks Heat's orchestration API v1 under ``<url>/v1/<tenant>`` with httpx, sending
``CONVERGENCE_TOKEN`` as ``X-Auth-Token``; ``convergence.cli.heat_json`` turns the answers into
the views and rows the output layer prints. Requests return at once; following one
(``--wait``) reads the stack's progress stream (Server-Sent Events, ``GET
.../progress?watch=true``: the request's counters, as the embedded mode reads them, whatever
the stack's size), or from a server without it the events watch stream, as ``event list
--follow`` does (``GET .../events?watch=true``): no polling.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from convergence.cli import output as out
from convergence.cli.client import STACK_TYPE, Refused, Request
from convergence.cli.common import EXIT_INTERRUPTED, interruptible
from convergence.cli.heat_json import (
    RemoteError,
    api_error,
    environment_body,
    event_view,
    resource_fields,
    sse_messages,
    stack_view,
)
from convergence.cli.listing import EventListing, ResourceListing, cut
from convergence.cli.progress import TERMINAL, View, settled
from convergence.cli.remote_progress import Progress, Shown, Told
from convergence.ports.views import EventView, StackView

if TYPE_CHECKING:
    from convergence.heat_fields import StackQuery

TIMEOUT = 30.0  # seconds for an ordinary request
STREAM_READ_TIMEOUT = 120.0  # the stream sends a keepalive every 15 s


class NoProgressStream(Exception):
    """The server has no progress stream (``GET .../progress``): an older one, or Heat."""


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
            raise api_error(response)
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
        env = environment_body(envs)
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

    def find_stack(self, name: str) -> StackView:
        """The stack as the API shows it now (its work is the server's)."""
        return self.get_stack(name)

    def last_event_id(self, s: StackView) -> int:
        data = self._json("GET", f"{self._path(s)}/events",
                          params={"sort_dir": "desc", "limit": 1})
        events = data.get("events") or []
        return int(events[0]["id"]) if events else 0

    def _watched(self, name: str, watch: bool) -> tuple[StackView, int]:
        """The stack a request is about, and (when it is to be followed) its last event id."""
        current = self.get_stack(name)
        return current, self.last_event_id(current) if watch else 0

    def create_stack(self, name: str, text: str, *, files: Mapping[str, str],
                     environments: Sequence[Any], parameters: Mapping[str, Any],
                     timeout_mins: int | None, disable_rollback: bool,
                     observe: bool = False, cloud: str | None = None) -> Request:
        body = self._body(text, files, environments, parameters)
        body.update(stack_name=name, disable_rollback=disable_rollback)
        if observe:
            body["observe"] = True
        if cloud is not None:
            body["cloud"] = cloud
        if timeout_mins is not None:
            body["timeout_mins"] = timeout_mins
        data = self._json("POST", "/stacks", json=body)
        return Request(self.get_stack(str(data["stack"]["id"])))

    def update_stack(self, name: str, text: str | None, *, files: Mapping[str, str] | None,
                     environments: Sequence[Any], parameters: Mapping[str, Any] | None,
                     existing: bool, timeout_mins: int | None, disable_rollback: bool | None,
                     watch: bool, converge: bool = False,
                     observe: bool | None = None) -> Request:
        """``PUT`` (a new template) or ``PATCH`` (``existing``); ``disable_rollback`` None:
        not sent, the stack keeps its setting."""
        current, after = self._watched(name, watch)
        body = self._body(text, files or {}, environments, parameters or {})
        if timeout_mins is not None:
            body["timeout_mins"] = timeout_mins
        if disable_rollback is not None:
            body["disable_rollback"] = disable_rollback
        if converge:
            body["converge"] = True
        if observe is not None:
            body["observe"] = observe
        self._json("PATCH" if existing else "PUT", self._path(current), json=body)
        return Request(self.get_stack(current.id), after)

    def check_stack(self, name: str, *, watch: bool) -> Request:
        """Heat's ``check`` action."""
        current, after = self._watched(name, watch)
        self._request("POST", f"{self._path(current)}/actions", json={"check": None})
        return Request(self.get_stack(current.id), after)

    def cancel_stack(self, name: str, *, rollback: bool, watch: bool) -> Request:
        """Heat's ``cancel_update`` (``rollback``) or ``cancel_without_rollback`` action."""
        current, after = self._watched(name, watch)
        action = "cancel_update" if rollback else "cancel_without_rollback"
        self._request("POST", f"{self._path(current)}/actions", json={action: None})
        return Request(self.get_stack(current.id), after)

    def delete_stack(self, name: str, *, watch: bool) -> Request:
        current, after = self._watched(name, watch)
        self._request("DELETE", self._path(current))
        try:
            return Request(self.get_stack(current.id), after)
        except RemoteError as exc:
            if exc.code != 404:
                raise
            return Request(replace(current, action="DELETE", status="COMPLETE"), after)

    def follows(self, wait: bool) -> bool:
        return wait  # the server does the work: only --wait follows it

    def follow(self, request: Request, view: View | None) -> StackView:
        """Follow the request on the progress stream (or the events) until it finished."""
        shown = Shown(view or View())
        try:
            with interruptible(f"\nStopped waiting; the server goes on with stack "
                               f"{request.stack.name}."):
                try:
                    return self._follow_progress(request.stack, shown)
                except NoProgressStream:
                    return self.wait(request.stack, request.after, lambda e, p: shown.show(
                        p.snapshot, now=e.resource_type == STACK_TYPE))
        finally:
            shown.view.close()

    def _follow_progress(self, s: StackView, shown: Shown) -> StackView:
        for told in self.watch_progress(s):
            stack = told.stack(s)
            shown.show(partial(told.snapshot, stack), now=settled(stack))
            if not settled(stack):
                continue
            try:
                current = self.get_stack(s.id)
            except RemoteError as exc:
                if exc.code == 404 and stack.action == "DELETE":
                    return stack  # gone: deleted
                raise
            if settled(current):
                shown.show(partial(told.snapshot, current), now=True)
                return current
        return s  # pragma: no cover - the stream only ends when the server goes

    def stack_events(self, s: StackView) -> list[EventView]:
        return self.list_events(s)

    # Events ------------------------------------------------------------------------------

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

    def event_page(self, s: StackView, listing: EventListing) -> list[EventView]:
        return self.list_events(s, query=listing.query())

    def follow_events(self, name: str, listing: EventListing,
                      on_event: Callable[[EventView], None]) -> None:
        """The stack's events, then (while its request runs) the watch stream until the
        request ends, then the events sent after the one that ended it."""
        s = self.get_stack(name)
        if settled(s):
            for e in self.list_events(s, query=listing.query()):
                on_event(e)
            return
        last = 0

        def emit(e: EventView, _: Progress) -> None:
            nonlocal last
            on_event(e)
            last = e.id

        try:
            self.wait(s, 0, emit)
        except KeyboardInterrupt:
            sys.exit(EXIT_INTERRUPTED)
        for e in self.list_events(s, after=last):
            on_event(e)

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

    def clear_hook(self, s: StackView, resource: str, hook: str) -> None:
        """``POST .../resources/{name}/signal`` with Heat's ``unset_hook``."""
        self._request("POST", f"{self._path(s)}/resources/{quote(resource, safe='')}/signal",
                      json={"unset_hook": hook})

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

    def resource_detail(self, s: StackView, resource_name: str) -> dict[str, Any]:
        data = self._json("GET", f"{self._path(s)}/resources/{quote(resource_name, safe='')}")
        return resource_fields(data["resource"], detail=True)

    # The engine itself -------------------------------------------------------------------

    def validate_template(self, text: str, *, files: Mapping[str, str],
                          environments: Sequence[Any],
                          parameters: Mapping[str, Any] | None) -> dict[str, Any]:
        """``POST /validate``: Heat's answer; a refusal raises RemoteError."""
        body = self._body(text, files, environments, parameters or {})
        result: dict[str, Any] = self._json("POST", "/validate", json=body)
        return result

    def validate(self, file: Path, *, root: Path, env_files: Sequence[Path],
                 params: Sequence[str]) -> dict[str, Any]:
        """The template with the files it references (the API takes it without a key of its
        own); a refusal (the API's or this side's, reading the files) raises Refused."""
        from convergence.cli.files import parse_params, sent_files
        from convergence.template import TemplateError

        try:
            files, environments = sent_files(file, file.read_bytes(), env_files, root,
                                             location=None)
            return self.validate_template(
                file.read_text(encoding="utf-8"), files=files, environments=environments,
                parameters=parse_params(params) if params else None)
        except TemplateError as exc:
            raise Refused([str(p) for p in exc.problems],
                          [{"path": p.path, "message": p.message, "kind": p.kind}
                           for p in exc.problems]) from None
        except RemoteError as exc:
            if exc.type not in ("StackValidationFailed", "RequestLimitExceeded"):
                raise
            raise Refused(exc.lines, [{"message": line} for line in exc.lines]) from None

    def list_services(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/services").get("services", []))

    # The watch stream --------------------------------------------------------------------

    def _stream(self, path: str, params: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """(event type, data) of each message of an SSE stream (forever)."""
        timeout = httpx.Timeout(TIMEOUT, read=STREAM_READ_TIMEOUT)
        try:
            with self._http.stream("GET", path, params=params,
                                   headers={"Accept": "text/event-stream"},
                                   timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    if response.status_code == 404 and path.endswith("/progress"):
                        raise NoProgressStream
                    raise api_error(response)
                yield from sse_messages(response.iter_lines())
        except httpx.HTTPError as exc:
            raise RemoteError(f"{self.url}: {exc or type(exc).__name__}") from None

    def watch(self, s: StackView, after: int) -> Iterator[EventView]:
        """The stack's events after the id ``after``, as they happen (forever)."""
        for kind, data in self._stream(f"{self._path(s)}/events",
                                       {"watch": "true", "marker": after}):
            yield event_view(json.loads(data), s, kind)

    def watch_progress(self, s: StackView) -> Iterator[Told]:
        """The stack's progress, each time it changed (forever); NoProgressStream when the
        server has no progress stream (an older one, or Heat)."""
        for kind, data in self._stream(f"{self._path(s)}/progress", {"watch": "true"}):
            if kind == "stack.progress":
                yield Told.parse(json.loads(data))

    def wait(self, s: StackView, after: int,
             on_event: Callable[[EventView, Progress], None] | None = None) -> StackView:
        """Follow the stream from the event id ``after`` until the stack's latest request
        finished; ``on_event`` sees every event, with what the stream told so far (one
        :class:`Progress`, kept up). Returns the stack as it ended."""
        told = Progress(s)

        def seen(e: EventView) -> None:
            told.event(e)
            if on_event is not None:
                on_event(e, told)

        if settled(s):  # already over: show what happened, without waiting
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
                        return told.stack  # gone: deleted
                    raise
                if settled(current):
                    return current
        return told.stack  # pragma: no cover - the stream only ends when the server goes


