"""``convergence stack create|update|cancel|delete``: the requests that change a stack.

Shaped like ``openstack stack create|update [--dry-run] [--parameter-file KEY=FILE]|cancel|
delete NAME...`` (python-heatclient), with ``-f table|json|yaml|value|csv`` and ``-c COLUMN``
for the stack shown after the request. Registered on the ``stack`` group by
``convergence.cli.groups``; written once for both modes against
``convergence.cli.client.StackClient`` (embedded: the use cases; remote: the API), and
finished by ``convergence.cli.follow``.

Embedded mode (no broker): a command that starts work runs its traversal to the end in this
process. With a broker, or remote, commands return at once unless ``--wait`` is given.
``--wait`` shows the progress and exits 0 when the request completed, 1 when it failed.

Exit codes: 0 success; 1 refused input (each problem on its own line with its path), a stack
not found, a conflict, or a failed request (a create or update that failed and was rolled
back, the default, counts as failed); 2 usage error; 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from convergence.cli import output as out
from convergence.cli.common import EXIT_INTERRUPTED, read_input, report_errors
from convergence.cli.follow import finish_request
from convergence.cli.parameter_files import read_parameter_files
from convergence.cli.state import CliState, open_client, pass_state
from convergence.errors import ConvergenceError

F = TypeVar("F", bound=Callable[..., Any])


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


def _parameters(params: tuple[str, ...], param_files: tuple[str, ...],
                template: Path | None) -> dict[str, Any]:
    """``-P`` values, then ``--parameter-file`` ones (which win)."""
    from convergence.cli.files import parse_params

    return {**parse_params(params), **read_parameter_files(param_files, template)}


@click.command("create")
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
@click.option("--observe", is_flag=True,
              help="Opt in to the observer: the stack is looked at now and then, and what "
                   "vanished or broke in the cloud is repaired (CONVERGENCE_OBSERVE_SECONDS).")
@click.option("--os-cloud", "cloud", metavar="NAME", default=None,
              help="Put the stack's resources in this cloud (a clouds.yaml entry) rather "
                   "than the engine's own; kept for the stack's life.")
@_dry_run_option("created")
@_wait_option
@out.format_option
@pass_state
@report_errors
def create(state: CliState, name: str, template: Path, env_files: tuple[Path, ...],
           params: tuple[str, ...], param_files: tuple[str, ...], files_dir: Path | None,
           timeout_mins: int | None, enable_rollback: bool, disable_rollback: bool,
           observe: bool, cloud: str | None, dry_run: bool, wait: bool, fmt: str) -> None:
    """Create stack NAME from a template; a failed create is rolled back unless told not to.
    With --dry-run, show the stack and resources it would make, and make nothing."""
    if enable_rollback and disable_rollback:
        raise click.UsageError("--enable-rollback and --disable-rollback contradict each other")
    parameters = _parameters(params, param_files, template)
    text, files, envs = read_input(template, env_files, files_dir)
    assert text is not None
    client = open_client(state)
    if dry_run:
        out.emit_record(client.preview_create(
            name, text, files=files, environments=envs, parameters=parameters,
            timeout_mins=timeout_mins, disable_rollback=disable_rollback),
            cast(out.Format, fmt))
        return
    request = client.create_stack(
        name, text, files=files, environments=envs, parameters=parameters,
        timeout_mins=timeout_mins, disable_rollback=disable_rollback, observe=observe,
        cloud=cloud)
    finish_request(client, request, wait, fmt)


@click.command("update")
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
@click.option("--observe/--no-observe", "observe", default=None,
              help="Opt the stack in to the observer, or out (default: keep its setting).")
@click.option("--converge", is_flag=True,
              help="Converge with what is really in the cloud too: make again what vanished, "
                   "replace what is in ERROR, change back what was changed behind the "
                   "engine's back.")
@_dry_run_option("changed")
@_wait_option
@out.format_option
@pass_state
@report_errors
def update(state: CliState, name: str, template: Path | None, existing: bool,
           env_files: tuple[Path, ...], params: tuple[str, ...], param_files: tuple[str, ...],
           files_dir: Path | None, timeout_mins: int | None, enable_rollback: bool | None,
           observe: bool | None, converge: bool, dry_run: bool, wait: bool,
           fmt: str) -> None:
    """Update stack NAME; it supersedes whatever the stack is doing. With --dry-run, show
    what the update would do to each resource (added, deleted, replaced, unchanged,
    updated), and change nothing. With --converge (and --existing, no template), repair
    the stack: it is brought back to its own template from what the cloud really has."""
    if template is None and not existing:
        raise click.UsageError("a template is needed (-t FILE), or --existing")
    parameters = _parameters(params, param_files, template)
    text, files, envs = read_input(template, env_files, files_dir)
    disable_rollback = None if enable_rollback is None else not enable_rollback
    client = open_client(state)
    if dry_run:
        out.emit_record(client.preview_update(
            client.find_stack(name), text, files=files, environments=envs,
            parameters=parameters, existing=existing), cast(out.Format, fmt))
        return
    request = client.update_stack(
        name, text, files=files or None, environments=envs, parameters=parameters or None,
        existing=existing, timeout_mins=timeout_mins, disable_rollback=disable_rollback,
        watch=wait, converge=converge, observe=observe)
    finish_request(client, request, wait, fmt)


@click.command("check")
@click.argument("name")
@_wait_option
@out.format_option
@pass_state
@report_errors
def check(state: CliState, name: str, wait: bool, fmt: str) -> None:
    """Check stack NAME against the cloud: every resource is looked at (missing, in ERROR or
    changed behind the engine's back fails its check) and nothing is changed. The stack
    ends CHECK_COMPLETE (exit 0) or CHECK_FAILED (exit 1; `convergence resource list` says
    which and why; `convergence stack update NAME --existing --converge` repairs them)."""
    client = open_client(state)
    finish_request(client, client.check_stack(name, watch=wait), wait, fmt)


@click.command("cancel")
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
    client = open_client(state)
    request = client.cancel_stack(name, rollback=not no_rollback, watch=wait)
    finish_request(client, request, wait, fmt, cancel="stop" if no_rollback else "rollback")


@click.command("delete")
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
    client = open_client(state)
    finish_request(client, client.delete_stack(name, watch=wait), wait, "table", show=False)


def _attempt_delete(state: CliState, name: str, wait: bool) -> bool:
    """:func:`_delete_one`, False when it failed, its error printed. An interruption
    (Ctrl-C) stops the whole command."""
    try:
        _delete_one(state, name, wait)
    except SystemExit as exc:  # the request failed: finish_request said why
        if exc.code == EXIT_INTERRUPTED:
            raise
        return not exc.code
    except (ConvergenceError, click.ClickException) as exc:
        message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        for line in message.splitlines() or [message]:
            click.echo(f"Error: {line}", err=True)
        return False
    return True
