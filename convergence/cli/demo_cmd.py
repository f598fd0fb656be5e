"""``convergence demo``: a real stack's whole life against a simulated cloud, shown live.

Run by ``make demo``. Uses ``examples/cloud-app.yaml``: a network, subnet, router to the
outside, two servers on ports of their own and a volume attached to one of them, made in a
simulated OpenStack cloud (``convergence_simcloud``, the optional ``convergence-simcloud``
distribution: without it the demo says how to install it) that it serves in this process.
The phases: create; update with ``cloud-app-update-env.yaml`` (``--existing``: a new flavor
replaces the application server, its port moving to the new one; a metadata change updates
the database server in place); the database server deleted behind the engine's back (a
fault rule of the cloud makes it vanish, as when its hypervisor dies); a ``stack check``
that finds it missing; an update with ``--converge`` that makes it again; the delete; and
the cloud's objects counted, to show nothing of the stack is left. Each phase shows the
live progress, the events it produced and a summary (resources created, updated, replaced,
deleted; the outputs).

Always the embedded default (in-process dispatcher), against a throwaway SQLite database in
a temporary folder unless ``--database-url`` is given, so it never touches the user's stacks:
it opens a runtime of its own and calls the use cases of ``convergence.services`` on it (not
``convergence.cli.client``), imported when it runs. Registered on the ``convergence`` group by
``convergence.cli``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from convergence.cli import output as out
from convergence.cli.common import read_input, report_errors
from convergence.cli.progress import make_view, run_to_end
from convergence.cli.simulated import require_simulated_cloud
from convergence.heat_fields import output_items

if TYPE_CHECKING:
    from rich.console import Console

    from convergence.ports.views import EventView, StackView
    from convergence.runtime import Runtime

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TEMPLATE = "cloud-app.yaml"
UPDATE_ENVIRONMENT = "cloud-app-update-env.yaml"
TENANT = "demo"
STACK = "app"
PHASES = 5
# The kinds of cloud object a stack of the example makes (and must leave none of).
MADE = ("server", "port", "network", "subnet", "router", "floatingip", "volume",
        "volume_attachment", "keypair")


@click.command("demo")
@click.option("--database-url", metavar="URL",
              help="Use this database instead of a throwaway SQLite file.")
@click.option("--examples-dir", type=click.Path(file_okay=False, path_type=Path),
              default=EXAMPLES, show_default=True, help="Where the example files are.")
@report_errors
def demo(database_url: str | None, examples_dir: Path) -> None:
    """Create, update, break, repair and delete a stack of servers, a network and a volume
    in a simulated cloud, on the embedded engine, and show it."""
    require_simulated_cloud("convergence demo", "runs its stack in a simulated cloud")
    missing = [n for n in (TEMPLATE, UPDATE_ENVIRONMENT) if not (examples_dir / n).is_file()]
    if missing:
        raise click.UsageError(f"{examples_dir}: missing {', '.join(missing)} "
                               "(give the examples folder with --examples-dir)")
    with tempfile.TemporaryDirectory(prefix="convergence-demo-") as folder:
        url = database_url or f"sqlite:///{Path(folder) / 'demo.db'}"
        ok = _run(url, examples_dir, Path(folder), throwaway=not database_url)
    if not ok:
        raise SystemExit(1)


def _run(url: str, examples: Path, folder: Path, *, throwaway: bool) -> bool:
    from convergence.runtime import open_runtime
    from convergence.services import queries, stacks
    from convergence.settings import Settings
    from convergence.store.db import redacted_url
    from convergence_simcloud import embedded
    from convergence_simcloud.client import SimControl

    cloud = embedded.start(folder / "simcloud", build_seconds=1.0)
    control = SimControl(cloud.url)
    # No broker: the embedded engine; the simulated cloud named as a user names a cloud.
    rt = open_runtime(Settings(database_url=url), environ=cloud.environ)
    try:
        con = out.console()
        name = _free_name(rt)
        con.print(f"[bold]Convergence demo[/bold]: stack {name!r} on the embedded engine "
                  f"(in-process dispatcher), in a simulated cloud at {cloud.url}",
                  highlight=False)
        con.print(f"database: {redacted_url(url)}" + (" (throwaway)" if throwaway else ""),
                  markup=False, highlight=False)
        seeded = control.objects()
        started = time.monotonic()
        text, files, envs = read_input(examples / TEMPLATE, [], None)
        assert text is not None

        _phase(con, 1, f"Create from {TEMPLATE}")
        s = stacks.create_stack(rt, TENANT, name, text, files=files, environments=envs)
        if not _follow(rt, con, s):
            return False

        _phase(con, 2, f"Update --existing with {UPDATE_ENVIRONMENT} (app: flavor m1.medium, "
                       "replaced; db: new metadata, in place)")
        _, _, update_envs = read_input(None, [examples / UPDATE_ENVIRONMENT], None)
        s = stacks.update_stack(rt, TENANT, name, None, environments=update_envs,
                                existing=True)
        if not _follow(rt, con, s):
            return False

        db = {r.name: r for r in queries.list_resources(rt, TENANT, s.id)}["db"]
        _phase(con, 3, f"Server db ({db.physical_id}) vanishes behind the engine's back; "
                       "stack check")
        control.add_rule("vanish_after", object_id=db.physical_id, seconds=0,
                         message="the hypervisor died")
        s = stacks.check_stack(rt, TENANT, name)
        if _follow(rt, con, s, outputs=False):
            con.print("the check should have found db missing", markup=False)
            return False

        _phase(con, 4, "Update --existing --converge: repaired from what the cloud has")
        s = stacks.update_stack(rt, TENANT, name, None, existing=True, converge=True)
        if not _follow(rt, con, s):
            return False

        _phase(con, 5, "Delete")
        s = stacks.delete_stack(rt, TENANT, name)
        if not _follow(rt, con, s, outputs=False):
            return False
        # What the cloud makes of its own for a project on first use (its default security
        # group and rules, volume types) is the cloud's, not the stack's.
        left = {k: n - seeded.get(k, 0) for k, n in control.objects().items()
                if k in MADE and n != seeded.get(k, 0)}
        con.print("Left in the cloud: " + (", ".join(f"{n} {k}" for k, n in left.items())
                                           if left else "nothing of the stack"),
                  markup=False, highlight=False)
        con.print(f"\nDone: stack {name!r} was created, updated, broken, checked, repaired "
                  f"and deleted in {time.monotonic() - started:.1f} s.")
        return not left
    finally:
        rt.store.engine.dispose()
        cloud.stop()


def _free_name(rt: Runtime) -> str:
    """The demo's stack name, made unique when a given database already has one."""
    from convergence.services import queries

    taken = {s.name for s in queries.list_stacks(rt, TENANT)}
    name, n = STACK, 1
    while name in taken:
        n += 1
        name = f"{STACK}-{n}"
    return name


def _phase(con: Console, n: int, title: str) -> None:
    con.print(f"\n[bold]{n}/{PHASES} {title}[/bold]", highlight=False)


def _follow(rt: Runtime, con: Console, accepted: StackView, *, outputs: bool = True) -> bool:
    """Run one request to its end, then show its events and a summary; True if it completed."""
    from convergence.services import queries

    before = max((e.id for e in queries.list_events(rt, TENANT, accepted.id)
                  if e.generation < accepted.generation), default=0)
    stack = run_to_end(rt, TENANT, accepted.id, view=make_view(con))
    events = [e for e in queries.list_events(rt, TENANT, stack.id, after=before)
              if e.generation == accepted.generation]
    for e in events:
        con.print("  " + out.event_line(e), markup=False, highlight=False)
    current = {r.name for r in queries.list_resources(rt, TENANT, stack.id)}
    for label, names in summarize(events, current).items():
        if names:
            con.print(f"{label} ({len(names)}): {', '.join(names)}", markup=False,
                      highlight=False)
    if outputs and stack.status == "COMPLETE":
        con.print("Outputs:")
        for item in output_items(stack):
            con.print(f"  {item['output_key']}: {item['output_value']}", markup=False,
                      highlight=False)
    con.print(f"Stack {stack.name} {stack.stack_status}"
              + ("" if stack.status == "COMPLETE" else f": {stack.status_reason}"),
              markup=False, highlight=False)
    return stack.status == "COMPLETE"


def summarize(events: Sequence[EventView], current: set[str]) -> dict[str, list[str]]:
    """What a request did to each resource, from its events (replaced: created and deleted)."""

    def reached(action: str, status: str = "COMPLETE") -> list[str]:
        names = [e.resource_name for e in events if e.resource_type != "OS::Heat::Stack"
                 and e.action == action and e.status == status]
        return list(dict.fromkeys(names))

    created, updated, deleted = reached("CREATE"), reached("UPDATE"), reached("DELETE")
    replaced = [n for n in created if n in deleted]
    failed = list(dict.fromkeys(e.resource_name for e in events
                                if e.resource_type != "OS::Heat::Stack"
                                and e.status == "FAILED"))
    touched = set(created) | set(updated) | set(deleted) | set(failed)
    return {
        "Created": [n for n in created if n not in replaced],
        "Updated": [n for n in updated if n not in replaced],
        "Replaced": replaced,
        "Deleted": [n for n in deleted if n not in replaced],
        "Failed": failed,
        "Unchanged": sorted(current - touched),
    }
