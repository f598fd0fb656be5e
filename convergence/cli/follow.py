"""After a stack request was accepted: follow it when due, show the stack, exit 0 or 1.

Callers: ``convergence.cli.stack_write_cmd`` (``stack create|update|cancel|delete``), in both
modes through ``convergence.cli.client.StackClient``. Embedded without a broker the request's
work runs here to its end; otherwise it is followed only with ``--wait`` (the progress on
stdout for tables, on stderr when stdout is JSON or YAML), and the command exits 0 when the
request completed, 1 when it failed. A create or update that failed and was rolled back (the
default) counts as failed, as heatclient sees it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import click

from convergence.cli import output as out
from convergence.cli.client import STACK_TYPE, Request, StackClient
from convergence.cli.common import EXIT_FAILED
from convergence.cli.progress import View, make_view, settled

if TYPE_CHECKING:
    from convergence.ports.views import EventView, StackView


def progress_view(wait: bool, fmt: str) -> View | None:
    """Progress for ``--wait``: on stdout for tables, on stderr when stdout is JSON/YAML."""
    if not wait:
        return None
    return make_view(out.console(stderr=fmt != "table"))


def failure(stack: StackView, accepted: StackView, cancel: str | None,
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


def finish_request(client: StackClient, request: Request, wait: bool, fmt: str, *,
                   show: bool = True, cancel: str | None = None) -> None:
    """Run or wait for the request when due, show the stack (``show``; else one line when
    it was followed), exit 1 when it failed.

    ``cancel``: the request was a cancel, with ("rollback") or without ("stop") rollback.
    """
    accepted = stack = request.stack
    followed = client.follows(wait)
    if followed:
        stack = client.follow(request, progress_view(wait, fmt))
    if show:
        out.emit_record(out.stack_fields(stack), cast(out.Format, fmt))
    elif followed:
        click.echo(f"Stack {stack.name} {stack.stack_status}")
    reason = failure(stack, accepted, cancel, lambda: client.stack_events(accepted))
    if reason is not None:
        click.echo(f"Error: stack {stack.name} {stack.stack_status}: {reason}", err=True)
        sys.exit(EXIT_FAILED)
