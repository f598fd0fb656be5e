"""``convergence simcloud``: serve the simulated OpenStack cloud and print its ``clouds.yaml``.

Registered (lazily) on the ``convergence`` group by ``convergence.cli``; the simulated cloud,
FastAPI and uvicorn are imported when the command runs. ``--state FILE`` keeps the cloud's
state in a JSON file (loaded at start, saved on each change and at shutdown); ``--seed FILE``
(YAML or JSON, see ``convergence.simcloud.seed.seed_from_mapping``) adds users, projects and
application credentials; ``--token-lifetime`` is how long a token lives; ``--build-seconds`` how
long a server stays in BUILD (``--flavor-build-seconds`` per flavor), ``--volume-seconds`` how
long Cinder's phases take (for all volumes or per size). The cloud's software-configuration
agent (Heat software deployments on the servers that ask for it) polls every
``--agent-poll-interval`` seconds; ``--no-agent`` starts it disabled (``PUT /_sim/agent``
enables it). Once listening it prints a ``clouds.yaml`` entry named ``simcloud`` (region
``RegionOne``) for the admin user.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

STARTUP_FAILURE = 3  # as ``convergence api``: the server could not start (port in use)
VOLUME_PHASES = ("create", "attach", "detach", "delete", "snapshot")


def _timing(option: str, text: str) -> tuple[str, float]:
    """``KEY=SECONDS`` as (KEY, seconds), or a usage error naming the option."""
    key, _, value = text.partition("=")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not key or seconds < 0:
        raise click.BadParameter(f"{text!r}: want KEY=SECONDS with SECONDS >= 0",
                                 param_hint=option)
    return key, seconds


@click.command("simcloud")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Keep the cloud's state in this JSON file.")
@click.option("--seed", "seed_file", type=click.Path(exists=True, dir_okay=False,
                                                     path_type=Path),
              default=None,
              help="Users, projects, credentials, flavors, images, zones, networks (YAML/JSON).")
@click.option("--build-seconds", default=1.0, show_default=True, type=float,
              help="How long a server stays in BUILD.")
@click.option("--flavor-build-seconds", "flavor_build", multiple=True, metavar="FLAVOR=SECONDS",
              help="How long servers of one flavor (name or id) stay in BUILD; repeatable.")
@click.option("--server-delete-seconds", default=0.0, show_default=True, type=float,
              help="How long a deleted server shows task_state deleting.")
@click.option("--volume-seconds", "volume_seconds", multiple=True,
              metavar="[SIZE:]PHASE=SECONDS",
              help="How long a volume phase takes (create, attach, detach, delete, snapshot), "
                   "for every volume or for volumes of SIZE GiB; repeatable.")
@click.option("--token-lifetime", default=3600.0, show_default=True, type=float,
              help="How long a token is valid, in seconds.")
@click.option("--agent-poll-interval", default=1.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="How often a server's software-configuration agent polls its metadata "
                   "(unless the server says).")
@click.option("--no-agent", is_flag=True,
              help="Start with the software-configuration agent disabled.")
def simcloud(host: str, port: int, state_file: Path | None, seed_file: Path | None,
             build_seconds: float, flavor_build: tuple[str, ...],
             server_delete_seconds: float, volume_seconds: tuple[str, ...],
             token_lifetime: float, agent_poll_interval: float, no_agent: bool) -> None:
    """Serve a simulated OpenStack cloud (Keystone, Nova, Neutron, Cinder, Glance) that
    openstacksdk and the openstack CLI accept; faults are set under /_sim/."""
    import yaml

    from convergence.simcloud.seed import Seed, seed_from_mapping
    from convergence.simcloud.serve import clouds_yaml, serve
    from convergence.simcloud.state import Options, SimCloud

    seed = Seed()
    if seed_file is not None:
        try:
            seed = seed_from_mapping(yaml.safe_load(seed_file.read_text()) or {})
        except (yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise click.UsageError(f"{seed_file}: not a seed: {exc}") from None
    options = Options(token_lifetime=token_lifetime, build_seconds=build_seconds,
                      server_delete_seconds=server_delete_seconds, state_file=state_file,
                      agent_enabled=not no_agent, agent_poll_interval=agent_poll_interval)
    for text in flavor_build:
        flavor, seconds = _timing("--flavor-build-seconds", text)
        options.flavor_build_seconds[flavor] = seconds
    for text in volume_seconds:
        key, seconds = _timing("--volume-seconds", text)
        size, _, phase = key.rpartition(":")
        if phase not in VOLUME_PHASES or (size and not size.isdigit()):
            raise click.BadParameter(f"{text!r}: want [SIZE:]PHASE=SECONDS with PHASE one of "
                                     f"{', '.join(VOLUME_PHASES)}", param_hint="--volume-seconds")
        if size:
            options.volume_size_seconds.setdefault(int(size), {})[phase] = seconds
        else:
            options.volume_seconds[phase] = seconds
    try:
        cloud = SimCloud(seed, options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    def ready(url: str) -> None:
        click.echo(f"# simcloud listening on {url}; a clouds.yaml entry:")
        click.echo(clouds_yaml(url, options.region), nl=False)
        sys.stdout.flush()

    if not serve(cloud, host, port, on_ready=ready):
        sys.exit(STARTUP_FAILURE)
