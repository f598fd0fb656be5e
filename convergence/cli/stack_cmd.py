"""``convergence stack|resource|event|output ...``: stacks from the command line, Heat-style.

Shaped like ``openstack stack ...`` (python-heatclient): ``stack create|update [--dry-run]
[--parameter-file KEY=FILE]|cancel|delete NAME...|list [--filter --sort --limit --marker]|
show|resources``, ``resource list [--filter --sort --limit --long]|show``, ``event list
[--follow]`` (or a page of the list: ``--resource``, ``--filter``, ``--limit``, ``--marker``,
``--sort``, paged by the database as the API's event list is; ``--nested-depth``),
``output list|show``, ``-f table|json|yaml|value|csv`` and ``-c COLUMN`` with Heat's field
names. Registered on the ``convergence`` group by ``convergence.cli``; calls
``convergence.services`` and nothing below it (the event list's page is the store's
``EventQuery``, a plain value), or, in the commands written once for both modes,
``convergence.cli.backend`` (as ``convergence.cli.resource_cmd`` and
``convergence.cli.stack_info_cmd`` are).

Embedded mode (no broker): a command that starts work runs its traversal to the end in this
process. A command that looks at a stack (``stack show``, ``resource``, ``event list``,
``output``) shows it as it is while another live process drives its work, and never waits for
it; it resumes only work that no live process is on any more (the command that started it was
interrupted, or its process died), first, showing the progress. With a broker, commands
return at once unless ``--wait`` is given. ``--wait`` shows the progress and exits 0 when the
request completed, 1 when it failed.

Remote mode (``--url`` / ``CONVERGENCE_URL``): the same commands talk to the API through
``convergence.cli.remote``; requests return at once unless ``--wait`` is given, and ``--wait``
and ``event list --follow`` read the API's events watch stream.

Exit codes: 0 success; 1 refused input (each problem on its own line with its path), a stack
or resource not found, a conflict, or a failed request (a create or update that failed and was
rolled back, the default, counts as failed); 2 usage error; 130 interrupted.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from convergence import services
from convergence.cli import output as out
from convergence.cli.backend import open_backend
from convergence.cli.files import parse_params, root_folder, sent_files
from convergence.cli.listing import (
    RESOURCE_FILTERS,
    RESOURCE_SORT_KEYS,
    ResourceListing,
    parse_filters,
    parse_sorts,
    sort_rows,
)
from convergence.cli.parameter_files import read_parameter_files
from convergence.cli.progress import Snapshot, View, make_view, run_to_end, settle, settled
from convergence.cli.remote import STACK_TYPE, Progress, RemoteClient
from convergence.cli.state import CliState, pass_state
from convergence.errors import ConvergenceError
from convergence.stack_pages import FILTER_KEYS, StackQuery
from convergence.store.event_pages import SORT_KEYS, EventQuery, sorts_by_type
from convergence.store.views import EventView, RecordView, StackView
from convergence.template import TemplateError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


# Errors --------------------------------------------------------------------------------------

def report_errors(f: F) -> F:
    """Turn the use cases' errors into messages and exit codes."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except TemplateError as exc:
            n = len(exc.problems)
            click.echo(f"Error: the input was refused ({n} error{'s' if n != 1 else ''}):",
                       err=True)
            for p in exc.problems:
                click.echo(str(p), err=True)
            sys.exit(EXIT_FAILED)
        except ConvergenceError as exc:
            raise click.ClickException(str(exc)) from None

    return cast(F, wrapper)


# Input ---------------------------------------------------------------------------------------

def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_input(template: Path | None, env_files: Sequence[Path],
               files_dir: Path | None) -> tuple[str | None, dict[str, str], list[Any]]:
    """The template text, the files map and the environments, as a Heat client sends them.

    The files map holds only the files the template and the environments reference, followed
    recursively (``convergence.cli.files``), keyed relative to ``--files-dir`` or the
    template's folder; environment template mappings are rewritten to those keys. Raises
    TemplateError for a bad environment or a referenced file that cannot be sent.
    """
    text = read_text(template) if template is not None else None
    files, envs = sent_files(template, text, env_files,
                             root_folder(template, env_files, files_dir))
    return text, files, envs


def _input_options(f: F) -> F:
    f = click.option("--files-dir", type=click.Path(exists=True, file_okay=False,
                                                     path_type=Path),
                     help="Folder the files map's keys are relative to (default: the "
                          "template's). Only the files the template and environments "
                          "reference are sent.")(f)
    f = click.option("--parameter-file", "param_files", multiple=True, metavar="KEY=FILE",
                     help="A parameter whose value is FILE's content (repeatable; a relative "
                          "FILE is read from the template's folder, as heatclient does).")(f)
    f = click.option("-P", "--parameter", "params", multiple=True, metavar="KEY=VALUE",
                     help="A parameter value (repeatable).")(f)
    f = click.option("-e", "--environment", "env_files", multiple=True,
                     type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="An environment file; several are merged in order.")(f)
    return f


_template_path = click.Path(exists=True, dir_okay=False, path_type=Path)


def _dry_run_option(what: str) -> Callable[[F], F]:
    return click.option("--dry-run", is_flag=True,
                        help=f"Do not do it: show what would be {what} (Heat's preview).")
_wait_option = click.option("--wait", is_flag=True,
                            help="Show progress until the request finished; exit 1 if it failed.")


# Running and showing -------------------------------------------------------------------------

def _progress_view(wait: bool, fmt: str) -> View | None:
    """Progress for ``--wait``: on stdout for tables, on stderr when stdout is JSON/YAML."""
    if not wait:
        return None
    return make_view(out.console(stderr=fmt != "table"))


@contextmanager
def _interruptible(state: CliState, stack: StackView) -> Iterator[None]:
    try:
        yield
    except KeyboardInterrupt:
        if state.embedded:
            click.echo(f"\nInterrupted: stack {stack.name} stays {stack.action}_IN_PROGRESS; "
                       "the next command that touches it resumes it.", err=True)
        else:
            click.echo(f"\nStopped waiting; the workers go on with stack {stack.name}.",
                       err=True)
        sys.exit(EXIT_INTERRUPTED)


def _failure(stack: StackView, accepted: StackView, cancel: str | None,
             events: Callable[[], Sequence[EventView]]) -> str | None:
    """Why the request did not do what was asked, or None when it did.

    A stack that ends ``*_FAILED`` failed, unless a cancel without rollback (``cancel`` is
    "stop") put it there itself, in its own generation. A stack that ends ``ROLLBACK_*``
    without a cancel asking for it had its create or update fail and undone: that request
    failed too (as heatclient sees it), for the reason its failure event gives.
    """
    if not settled(stack):
        return None
    if stack.status == "FAILED":
        if cancel == "stop" and stack.generation == accepted.generation:
            return None
        return stack.status_reason
    if stack.action == "ROLLBACK" and cancel != "rollback":
        # The stack's last failure is what started the rollback. (Remote mode: ``accepted``
        # may be read after the rollback began, so its action and generation cannot tell.)
        failures = [e for e in events() if e.resource_type == STACK_TYPE
                    and e.status == "FAILED" and e.action != "ROLLBACK"]
        if not failures:
            return "the request failed and was rolled back"
        return f"the {failures[-1].action} failed and was rolled back: {failures[-1].reason}"
    return None


def _exit_if_failed(stack: StackView, reason: str | None) -> None:
    if reason is not None:
        click.echo(f"Error: stack {stack.name} {stack.stack_status}: {reason}", err=True)
        sys.exit(EXIT_FAILED)


def finish_request(state: CliState, stack: StackView, wait: bool, fmt: str, *,
                   show: bool = True, cancel: str | None = None) -> None:
    """After a request was accepted: run or wait for it when due, show the stack, exit.

    ``cancel``: the request was a cancel, with ("rollback") or without ("stop") rollback.
    """
    accepted = stack
    rt = state.runtime()
    if wait or state.embedded:
        with _interruptible(state, stack):
            stack = run_to_end(rt, state.tenant, stack.id, view=_progress_view(wait, fmt))
    if show:
        out.emit_record(out.stack_fields(stack), cast(out.Format, fmt))
    elif wait or state.embedded:
        click.echo(f"Stack {stack.name} {stack.stack_status}")
    _exit_if_failed(stack, _failure(stack, accepted, cancel, lambda: services.list_events(
        rt, state.tenant, accepted.id)))


def _snapshot(p: Progress) -> Snapshot:
    """Remote mode: what the watch stream told so far, as the progress views show it."""
    done = sum(1 for status in p.resources.values() if status.endswith("_COMPLETE"))
    if settled(p.stack) and p.stack.status == "COMPLETE":
        done = len(p.resources)
    busy = tuple(sorted(n for n, status in p.resources.items()
                        if status.endswith("_IN_PROGRESS")))
    return Snapshot(p.stack, len(p.resources), done, busy)


def finish_remote(client: RemoteClient, stack: StackView, after: int, wait: bool, fmt: str,
                  *, show: bool = True, cancel: str | None = None) -> None:
    """Remote mode: after a request was accepted, follow it on the stream when asked, show
    the stack, exit (1 when it failed)."""
    accepted = stack
    if wait:
        view = _progress_view(wait, fmt) or View()
        try:
            stack = client.wait(stack, after, lambda _, p: view.show(_snapshot(p)))
        except KeyboardInterrupt:
            click.echo(f"\nStopped waiting; the server goes on with stack {stack.name}.",
                       err=True)
            sys.exit(EXIT_INTERRUPTED)
        finally:
            view.close()
    if show:
        out.emit_record(out.stack_fields(stack), cast(out.Format, fmt))
    elif wait:
        click.echo(f"Stack {stack.name} {stack.stack_status}")
    _exit_if_failed(stack, _failure(stack, accepted, cancel,
                                    lambda: client.list_events(accepted)))


def _stack(state: CliState, name: str) -> StackView:
    """A stack by name or id, as it is now; in embedded mode, work on it that no live process
    is on any more (interrupted, or its process died) is finished first."""
    client = state.remote()
    if client is not None:
        return client.get_stack(name)
    rt = state.runtime()
    stack = services.get_stack(rt, state.tenant, name)
    with _interruptible(state, stack):
        return settle(rt, state.tenant, stack)


# stack ---------------------------------------------------------------------------------------

@click.group()
def stack() -> None:
    """Create, update, delete and look at stacks."""


@stack.command("create")
@click.argument("name")
@click.option("-t", "--template", "template", required=True, type=_template_path,
              help="The template file.")
@_input_options
@click.option("--timeout", "timeout_mins", type=click.IntRange(min=1), metavar="MIN",
              help="Fail the stack's requests that take longer than this many minutes.")
@click.option("--enable-rollback", is_flag=True,
              help="Roll back a failed create (the default; accepted as heatclient does).")
@click.option("--disable-rollback", is_flag=True,
              help="Do not roll back a failed create: leave what it made, CREATE_FAILED.")
@_dry_run_option("created")
@_wait_option
@out.format_option
@pass_state
@report_errors
def create(state: CliState, name: str, template: Path, env_files: tuple[Path, ...],
           params: tuple[str, ...], param_files: tuple[str, ...], files_dir: Path | None,
           timeout_mins: int | None, enable_rollback: bool, disable_rollback: bool,
           dry_run: bool, wait: bool, fmt: str) -> None:
    """Create stack NAME from a template; a failed create is rolled back unless told not to.
    With --dry-run, show the stack and resources it would make, and make nothing."""
    if enable_rollback and disable_rollback:
        raise click.UsageError("--enable-rollback and --disable-rollback contradict each other")
    parameters = {**parse_params(params), **read_parameter_files(param_files, template)}
    text, files, envs = read_input(template, env_files, files_dir)
    assert text is not None
    if dry_run:
        out.emit_record(open_backend(state).preview_create(
            name, text, files=files, environments=envs, parameters=parameters,
            timeout_mins=timeout_mins, disable_rollback=disable_rollback),
            cast(out.Format, fmt))
        return
    client = state.remote()
    if client is not None:
        stack = client.create_stack(
            name, text, files=files, environments=envs, parameters=parameters,
            timeout_mins=timeout_mins, disable_rollback=disable_rollback)
        finish_remote(client, stack, 0, wait, fmt)
        return
    created = services.create_stack(
        state.runtime(), state.tenant, name, text, files=files, environments=envs,
        parameters=parameters, timeout_mins=timeout_mins, disable_rollback=disable_rollback)
    finish_request(state, created, wait, fmt)


@stack.command("update")
@click.argument("name")
@click.option("-t", "--template", "template", type=_template_path,
              help="The new template file (with --existing: optional).")
@click.option("--existing", is_flag=True,
              help="Start from the stack's current template, environment and parameters.")
@_input_options
@click.option("--timeout", "timeout_mins", type=click.IntRange(min=1), metavar="MIN",
              help="A new timeout for the stack's requests, in minutes.")
@click.option("--enable-rollback/--disable-rollback", "enable_rollback", default=None,
              help="Roll back this and later failed requests, or not (default: keep the "
                   "stack's setting).")
@_dry_run_option("changed")
@_wait_option
@out.format_option
@pass_state
@report_errors
def update(state: CliState, name: str, template: Path | None, existing: bool,
           env_files: tuple[Path, ...], params: tuple[str, ...], param_files: tuple[str, ...],
           files_dir: Path | None, timeout_mins: int | None, enable_rollback: bool | None,
           dry_run: bool, wait: bool, fmt: str) -> None:
    """Update stack NAME; it supersedes whatever the stack is doing. With --dry-run, show
    what the update would do to each resource (added, deleted, replaced, unchanged,
    updated), and change nothing."""
    if template is None and not existing:
        raise click.UsageError("a template is needed (-t FILE), or --existing")
    parameters = {**parse_params(params), **read_parameter_files(param_files, template)}
    text, files, envs = read_input(template, env_files, files_dir)
    disable_rollback = None if enable_rollback is None else not enable_rollback
    if dry_run:
        out.emit_record(open_backend(state).preview_update(
            _stack(state, name), text, files=files, environments=envs, parameters=parameters,
            existing=existing), cast(out.Format, fmt))
        return
    client = state.remote()
    if client is not None:
        current = client.get_stack(name)
        after = client.last_event_id(current) if wait else 0
        stack = client.update_stack(
            current.id, text, files=files or None, environments=envs,
            parameters=parameters or None, existing=existing, timeout_mins=timeout_mins,
            disable_rollback=disable_rollback)
        finish_remote(client, stack, after, wait, fmt)
        return
    updated = services.update_stack(
        state.runtime(), state.tenant, name, text, files=files or None,
        environments=envs, parameters=parameters or None, existing=existing,
        timeout_mins=timeout_mins, disable_rollback=disable_rollback)
    finish_request(state, updated, wait, fmt)


@stack.command("cancel")
@click.argument("name")
@click.option("--no-rollback", is_flag=True,
              help="Stop where it is (a create or an update): the stack ends CREATE_FAILED or "
                   "UPDATE_FAILED at once, with what was done so far.")
@_wait_option
@out.format_option
@pass_state
@report_errors
def cancel(state: CliState, name: str, no_rollback: bool, wait: bool, fmt: str) -> None:
    """Cancel the create or update in progress on stack NAME, rolling it back to the last
    template that converged (ROLLBACK_COMPLETE; a create: to nothing); with --no-rollback,
    stop it where it is.

    Exits 0 when cancelled (with --no-rollback the stack is then *_FAILED, as Heat leaves
    it), 1 when there is nothing to cancel or the rollback failed.
    """
    kind = "stop" if no_rollback else "rollback"
    client = state.remote()
    if client is not None:
        current = client.get_stack(name)
        after = client.last_event_id(current) if wait else 0
        stack = client.cancel_stack(current, rollback=not no_rollback)
        finish_remote(client, stack, after, wait, fmt, cancel=kind)
        return
    # No settling first: the request in progress is the one to cancel, not to finish.
    rt = state.runtime()
    cancelled = services.cancel_stack(rt, state.tenant, name, rollback=not no_rollback)
    finish_request(state, cancelled, wait, fmt, cancel=kind)


@stack.command("delete")
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@_wait_option
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_state
@report_errors
def delete(state: CliState, names: tuple[str, ...], wait: bool, yes: bool) -> None:
    """Delete each stack NAME and everything it made.

    Each one is attempted, whatever became of the others; each failure is printed, and the
    exit code is 1 when any of them failed (as heatclient's ``stack delete``).
    """
    if not yes and sys.stdin.isatty():
        click.confirm(f"Delete stack{'s' if len(names) > 1 else ''} {', '.join(names)}?",
                      abort=True)
    if len(names) == 1:  # its error alone says it all
        _delete_one(state, names[0], wait)
        return
    failed = sum(not _attempt_delete(state, name, wait) for name in names)
    if failed:
        raise click.ClickException(f"Unable to delete {failed} of the {len(names)} stacks.")


def _delete_one(state: CliState, name: str, wait: bool) -> None:
    """Delete one stack and, when due, follow it to its end (exit 1 when it failed)."""
    client = state.remote()
    if client is not None:
        current = client.get_stack(name)
        after = client.last_event_id(current) if wait else 0
        finish_remote(client, client.delete_stack(current.id), after, wait, "table",
                      show=False)
        return
    deleted = services.delete_stack(state.runtime(), state.tenant, name)
    finish_request(state, deleted, wait, "table", show=False)


def _attempt_delete(state: CliState, name: str, wait: bool) -> bool:
    """:func:`_delete_one`, False when it failed, its error printed. An interruption
    (Ctrl-C) stops the whole command."""
    try:
        _delete_one(state, name, wait)
    except SystemExit as exc:  # the request failed: finish_* said why
        if exc.code == EXIT_INTERRUPTED:
            raise
        return not exc.code
    except (ConvergenceError, click.ClickException) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        for line in message.splitlines() or [message]:
            click.echo(f"Error: {line}", err=True)
        return False
    return True


_STACK_SORT_KEYS = ("id", "stack_name", "stack_status", "creation_time", "updated_time")
_API_STACK_SORT_KEYS = ("stack_name", "stack_status", "creation_time", "updated_time")


@stack.command("list")
@click.option("--filter", "--property", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the stacks whose KEY is VALUE (KEY: id, name, status, action; a "
                   "status matches COMPLETE or CREATE_COMPLETE); several values of a key: "
                   "any of them.")
@click.option("--sort", "sorts", multiple=True, metavar="KEY[:asc|desc]",
              help="Order by KEY (stack_name, stack_status, creation_time (the default), "
                   "updated_time, id); several keys: repeat, or separate with commas.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many stacks.")
@click.option("--marker", metavar="ID", help="Start after the stack of this id.")
@click.option("--deleted", is_flag=True, help="Include deleted stacks.")
@out.format_option
@pass_state
@report_errors
def list_(state: CliState, filters: tuple[str, ...], sorts: tuple[str, ...],
          limit: int | None, marker: str | None, deleted: bool, fmt: out.Format) -> None:
    """List the stacks of the project (each with its template's description: -c description,
    or -f json|yaml)."""
    order = parse_sorts(sorts, _STACK_SORT_KEYS)
    # The API pages in one direction; the rows are then sorted here too, key by key, as
    # heatclient sorts them.
    query = StackQuery(
        filters=parse_filters(filters, FILTER_KEYS),
        sort_keys=[k for k, _ in order if k in _API_STACK_SORT_KEYS] or ["creation_time"],
        descending=order[0][1] if order else False, marker=marker, limit=limit,
        include_deleted=deleted)
    rows = sort_rows(open_backend(state).stack_rows(query), order)
    columns = out.STACK_COLUMNS + ((("deletion_time", "Deletion Time"),) if deleted else ())
    out.emit_list(rows, columns, fmt)


@stack.command("show")
@click.argument("name")
@out.format_option
@pass_state
@report_errors
def show(state: CliState, name: str, fmt: out.Format) -> None:
    """Show stack NAME: its description, every parameter's value (defaults included, hidden
    ones masked, Heat's pseudo-parameters too) and its outputs."""
    s = _stack(state, name)
    out.emit_record(open_backend(state).stack_detail(s), fmt)


# resource ------------------------------------------------------------------------------------

@click.command("list")
@click.argument("name")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the resources whose KEY is VALUE (KEY: name, status, action, type, "
                   "id, physical_resource_id; a status matches FAILED or CREATE_FAILED); "
                   "several values of a key: any of them.")
@click.option("--sort", "sorts", multiple=True, metavar="KEY[:asc|desc]",
              help="Order by KEY (resource_name, resource_type, resource_status, "
                   "updated_time, physical_resource_id); several keys: repeat, or separate "
                   "with commas.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many resources.")
@click.option("--long", "long_", is_flag=True, help="Show each resource's stack too.")
@click.option("-n", "--nested-depth", type=click.IntRange(min=0), metavar="DEPTH",
              help="The resources of nested stacks this deep too (none here yet).")
@out.format_option
@pass_state
@report_errors
def resource_list(state: CliState, name: str, filters: tuple[str, ...], sorts: tuple[str, ...],
                  limit: int | None, long_: bool, nested_depth: int | None,
                  fmt: out.Format) -> None:
    """List the resources of stack NAME."""
    listing = ResourceListing(filters=parse_filters(filters, RESOURCE_FILTERS),
                              sorts=tuple(parse_sorts(sorts, RESOURCE_SORT_KEYS)),
                              limit=limit, nested_depth=nested_depth, with_detail=long_)
    s = _stack(state, name)
    columns = list(out.RESOURCE_COLUMNS)
    if long_ or nested_depth:
        columns.append(("stack_name", "Stack Name"))
    out.emit_list(open_backend(state).resource_rows(s, listing), columns, fmt)


@click.group()
def resource() -> None:
    """Look at a stack's resources."""


@resource.command("show")
@click.argument("name")
@click.argument("resource_name", metavar="RESOURCE")
@out.format_option
@pass_state
@report_errors
def resource_show(state: CliState, name: str, resource_name: str, fmt: out.Format) -> None:
    """Show RESOURCE of stack NAME."""
    s = _stack(state, name)
    client = state.remote()
    if client is not None:
        out.emit_record(client.show_resource(s, resource_name), fmt)
        return
    records = services.list_resources(state.runtime(), state.tenant, s.id)
    record = _current(records, resource_name)
    if record is None:
        raise click.ClickException(
            f"The Resource ({resource_name}) could not be found in stack {s.name}.")
    out.emit_record(out.resource_detail(record, records), fmt)


def _current(records: Sequence[RecordView], name: str) -> RecordView | None:
    """The version of a resource the stack uses (not one being replaced)."""
    versions = [r for r in records if r.name == name]
    if not versions:
        return None
    return max(versions, key=lambda r: (r.replaced_by is None, r.id))


resource.add_command(resource_list)
stack.add_command(resource_list, "resources")


# event ---------------------------------------------------------------------------------------

@click.group()
def event() -> None:
    """Look at a stack's events."""


_EVENT_FILTERS = ("resource_name", "resource_action", "resource_status", "resource_type",
                  "physical_resource_id")


@event.command("list")
@click.argument("name")
@click.option("--resource", help="Only the events of this resource.")
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE",
              help="Only the events whose KEY is VALUE (KEY: resource_name, resource_action, "
                   "resource_status, resource_type, physical_resource_id); several values of "
                   "a key: any of them.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many events.")
@click.option("--marker", type=int, help="Start after this event id, in the chosen order.")
@click.option("--sort", "sorts", multiple=True, metavar="KEY[:asc|desc]",
              help="Order by event_time (the default) or resource_type; ':desc' for the "
                   "newest first.")
@click.option("--nested-depth", type=click.IntRange(min=0), metavar="DEPTH",
              help="The events of nested stacks this deep too (none here yet); not with "
                   "--resource.")
@click.option("--follow", is_flag=True,
              help="Print events as they happen, until the stack's current request ends.")
@out.format_option
@pass_state
@report_errors
def event_list(state: CliState, name: str, resource: str | None, filters: tuple[str, ...],
               limit: int | None, marker: int | None, sorts: tuple[str, ...],
               nested_depth: int | None, follow: bool, fmt: out.Format) -> None:
    """List the events of stack NAME (stack-level ones carry the stack's name and id)."""
    paged = bool(resource or filters or sorts) or limit is not None or marker is not None
    if follow and paged:
        raise click.UsageError("--follow prints every event: it takes no --resource, "
                               "--filter, --limit, --marker or --sort.")
    if follow and fmt in ("value", "csv"):
        raise click.UsageError("--follow prints a log: -f table (a line an event), json or "
                               "yaml.")
    if resource and nested_depth is not None:
        raise click.UsageError("--nested-depth cannot be given with --resource.")
    query, params = _event_page(resource, filters, limit, marker, sorts)
    if nested_depth is not None:
        params["nested_depth"] = nested_depth
    client = state.remote()
    if client is not None:
        _remote_events(client, name, follow, fmt, params)
        return
    rt = state.runtime()
    if not follow:
        s = _stack(state, name)
        events = services.list_events(rt, state.tenant, s.id, query=query)
        _emit_events(events, s, nested_depth is not None, fmt)
        return
    s = services.get_stack(rt, state.tenant, name)
    last = 0

    def emit(new: list[EventView]) -> None:
        nonlocal last
        for e in new:
            if fmt == "table":
                click.echo(out.event_line(e))
            elif fmt == "json":  # one JSON object per line
                click.echo(json.dumps(out.event_fields(e), default=str))
            else:
                click.echo("---\n" + out.dump(out.event_fields(e), fmt))
            last = e.id

    def poll(_: StackView) -> None:
        emit(services.list_events(rt, state.tenant, s.id, after=last))

    poll(s)
    if not settled(s):
        with _interruptible(state, s):
            run_to_end(rt, state.tenant, s.id, extra=poll)
    poll(s)


stack.add_command(event_list, "events")


def _event_page(resource: str | None, filters: Sequence[str], limit: int | None,
                marker: int | None, sorts: Sequence[str]) -> tuple[EventQuery, dict[str, Any]]:
    """The page ``event list`` asks for: as the store's query (embedded) and as the query
    string of Heat's event list (remote), which pages the same way."""
    wanted: dict[str, list[str]] = {key: [] for key in _EVENT_FILTERS}
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or key not in wanted:
            raise click.BadParameter(f"{item!r}: KEY=VALUE, KEY one of "
                                     f"{', '.join(_EVENT_FILTERS)}", param_hint="--filter")
        wanted[key].append(value)
    if resource:
        wanted["resource_name"] = [resource]
    keys, directions = [], set()
    for item in sorts:
        key, _, direction = item.partition(":")
        key = key or "event_time"
        if key not in SORT_KEYS or direction not in ("", "asc", "desc"):
            raise click.BadParameter(f"{item!r}: KEY[:asc|desc], KEY one of "
                                     f"{', '.join(SORT_KEYS)}", param_hint="--sort")
        keys.append(key)
        directions.add(direction or "asc")
    if len(directions) > 1:  # Heat's list has one direction for all its keys
        raise click.BadParameter("one direction for every key", param_hint="--sort")
    descending = directions == {"desc"}
    query = EventQuery(limit=limit, marker=marker, descending=descending,
                       by_type=sorts_by_type(keys),
                       resource_names=tuple(wanted["resource_name"]),
                       actions=tuple(wanted["resource_action"]),
                       statuses=tuple(wanted["resource_status"]),
                       resource_types=tuple(wanted["resource_type"]),
                       physical_ids=tuple(wanted["physical_resource_id"]))
    params: dict[str, Any] = {"sort_dir": "desc" if descending else "asc",
                              **{k: v for k, v in wanted.items() if v}}
    if keys:
        params["sort_keys"] = keys
    if limit is not None:
        params["limit"] = limit
    if marker is not None:
        params["marker"] = marker
    return query, params


def _emit_events(events: Sequence[EventView], s: StackView, nested: bool,
                 fmt: out.Format) -> None:
    """The event list; with ``--nested-depth``, each event's stack too (as heatclient shows
    it: events of nested stacks would name theirs)."""
    if not nested:
        out.emit_list([out.event_fields(e) for e in events], out.EVENT_COLUMNS, fmt)
        return
    out.emit_list([{**out.event_fields(e), "stack_name": s.name} for e in events],
                  (*out.EVENT_COLUMNS, ("stack_name", "Stack Name")), fmt)


def _echo_event(e: EventView, fmt: out.Format) -> None:
    """One event of ``--follow``: a log line, a JSON object per line, or a YAML document."""
    if fmt == "table":
        click.echo(out.event_line(e))
    elif fmt == "json":
        click.echo(json.dumps(out.event_fields(e), default=str))
    else:
        click.echo("---\n" + out.dump(out.event_fields(e), fmt))


def _remote_events(client: RemoteClient, name: str, follow: bool, fmt: out.Format,
                   params: Mapping[str, Any]) -> None:
    """Remote mode: the event list (the page ``params`` asks for), or (``--follow``) the watch
    stream until the stack's current request ends."""
    s = client.get_stack(name)
    if not follow or settled(s):
        events = client.list_events(s, query=params)
        if not follow:
            _emit_events(events, s, "nested_depth" in params, fmt)
            return
        for e in events:
            _echo_event(e, fmt)
        return
    last = 0

    def emit(e: EventView, _: Progress) -> None:
        nonlocal last
        _echo_event(e, fmt)
        last = e.id

    try:
        client.wait(s, 0, emit)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    for e in client.list_events(s, after=last):  # those sent after the one that ended it
        _echo_event(e, fmt)


# output --------------------------------------------------------------------------------------

@click.group()
def output() -> None:
    """Look at a stack's outputs."""


@output.command("list")
@click.argument("name")
@out.format_option
@pass_state
@report_errors
def output_list(state: CliState, name: str, fmt: out.Format) -> None:
    """List the outputs of stack NAME."""
    items = out.output_items(_stack(state, name))
    out.emit_list([{"output_key": i["output_key"], "description": i["description"]}
                   for i in items], out.OUTPUT_COLUMNS, fmt)


@output.command("show")
@click.argument("name")
@click.argument("key")
@out.format_option
@pass_state
@report_errors
def output_show(state: CliState, name: str, key: str, fmt: out.Format) -> None:
    """Show output KEY of stack NAME."""
    s = _stack(state, name)
    for item in out.output_items(s):
        if item["output_key"] == key:
            out.emit_record(item, fmt)
            return
    raise click.ClickException(f"The Output ({key}) could not be found in stack {s.name}.")


stack.add_command(output_list, "outputs")
