"""``convergence admin ...``: operator commands that act on the database directly.

``convergence admin make-key`` prints a new encryption key, for
``CONVERGENCE_ENCRYPTION_KEYS`` (``convergence.store.sealing``).

``convergence admin reset STACK`` takes a stack out of whatever it is doing: every lease and
poll watch on its resources is let go of (a worker still acting on one is refused when it
writes) and a request in progress is stopped where it is, the stack ending FAILED and taking
any request after. Crash recovery never needs it (the sweeper re-drives what a dead worker
left); it is for a human who decided a stack's current work must end now.

It works on the database named by ``CONVERGENCE_DATABASE_URL``, in the project
``CONVERGENCE_PROJECT_ID``, never through the API: it calls ``convergence.services`` directly,
not through ``convergence.cli.client``. Registered on the ``convergence`` group by
``convergence.cli``.
"""

from __future__ import annotations

import click

from convergence.cli.common import report_errors
from convergence.cli.state import CliState, pass_state


@click.group()
def admin() -> None:
    """Operator commands on the database (not through the API)."""


@admin.command("reset")
@click.argument("stack_name")
@pass_state
@report_errors
def reset(state: CliState, stack_name: str) -> None:
    """Let go of STACK's leases and stop the request in progress, if any (ends FAILED)."""
    from convergence.services import stacks

    if state.url:
        raise click.UsageError("admin reset works on the database, not through the API: "
                               "unset --url / CONVERGENCE_URL")
    stack, released = stacks.reset_stack(state.runtime(), state.tenant, stack_name)
    click.echo(f"{stack.name} ({stack.id}): {stack.stack_status} at generation "
               f"{stack.generation}; {released} lease(s) let go of")


@admin.command("make-key")
def make_key() -> None:
    """Print a new key for CONVERGENCE_ENCRYPTION_KEYS (a Fernet key).

    The secrets the engine stores are encrypted with the first key of the setting and
    decrypted with any of them: to rotate, put a new key first, run `convergence db
    rotate-keys`, then drop the old one."""
    from convergence.store.sealing import make_key as new_key

    click.echo(new_key())
