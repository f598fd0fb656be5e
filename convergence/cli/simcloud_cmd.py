"""``convergence simcloud``: serve the simulated OpenStack cloud and print its ``clouds.yaml``.

Registered (lazily) on the ``convergence`` group by ``convergence.cli``; the simulated cloud,
FastAPI and uvicorn are imported when the command runs. The simulated cloud is the optional
``convergence-simcloud`` distribution: without it the command says how to install it.
``--state FILE`` keeps the cloud's state in a JSON file (loaded at start, saved on each change
and at shutdown); ``--seed FILE`` (YAML or JSON, see
``convergence_simcloud.seed.seed_from_mapping``) adds users, projects and application
credentials; ``--token-lifetime`` is how long a token lives; ``--build-seconds`` how
long a server stays in BUILD (``--flavor-build-seconds`` per flavor), ``--volume-seconds`` how
long Cinder's phases take (for all volumes or per size). The cloud's software-configuration
agent (Heat software deployments on the servers that ask for it) polls every
``--agent-poll-interval`` seconds; ``--no-agent`` starts it disabled (``PUT /_sim/agent``
enables it). The agent executes nothing unless told: a ``script`` config's run is simulated
(it succeeds, says so, and its outputs are derived from its inputs). ``--execute-scripts``
executes them on this host, logged as a warning at start, confined by
``convergence_simcloud.agent_scripts``: as ``--script-user`` (default ``nobody``) when the
command runs as root, never as root, for at most ``--script-timeout`` seconds, sending back at
most ``--script-output-limit`` bytes per stream.

Like ``convergence api`` without authentication, it listens on loopback addresses only unless
told otherwise (``--allow-remote``): its users and passwords are the seed's (``admin``/``admin``
by default) and its ``/_sim/`` control plane changes anything. Served elsewhere, ``/_sim/``
wants a control token (``--control-token`` or ``CONVERGENCE_SIMCLOUD_CONTROL_TOKEN``; else one
is generated and printed on stderr), sent as ``X-Sim-Control-Token`` (``SimControl(url,
token=...)``). Once listening it prints a ``clouds.yaml`` entry named ``simcloud`` (region
``RegionOne``) for the admin user on stdout, and nothing else: its messages and uvicorn's
access log go to stderr.
"""

from __future__ import annotations

import logging
import secrets
import sys
from pathlib import Path

import click

from convergence.cli.api_cmd import is_loopback
from convergence.cli.simulated import require_simulated_cloud

STARTUP_FAILURE = 3  # as ``convergence api``: the server could not start (port in use)
VOLUME_PHASES = ("create", "attach", "detach", "delete", "snapshot")
CONTROL_TOKEN_ENV = "CONVERGENCE_SIMCLOUD_CONTROL_TOKEN"
log = logging.getLogger(__name__)


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
@click.option("--execute-scripts", is_flag=True,
              help="Execute the 'script' software configs of deployments on this host (as "
                   "--script-user when run as root). Without it their runs are simulated.")
@click.option("--script-user", default="nobody", show_default=True, metavar="USER",
              help="The account executed scripts run as when this command runs as root.")
@click.option("--script-timeout", default=600.0, show_default=True,
              type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="An executed script's time limit (then it is killed and fails).")
@click.option("--script-output-limit", default=1 << 20, show_default=True,
              type=click.IntRange(min=1), metavar="BYTES",
              help="The bytes of an executed script's stdout, of its stderr and of its "
                   "outputs together that are sent back.")
@click.option("--allow-remote", is_flag=True,
              help="Listen on an address other than loopback (anyone who reaches it can use "
                   "the seed's users; /_sim/ then wants the control token).")
@click.option("--control-token", envvar=CONTROL_TOKEN_ENV, default=None, metavar="TOKEN",
              help="The token /_sim/ wants in X-Sim-Control-Token (generated when serving "
                   f"off loopback without one); also {CONTROL_TOKEN_ENV}.")
def simcloud(host: str, port: int, state_file: Path | None, seed_file: Path | None,
             build_seconds: float, flavor_build: tuple[str, ...],
             server_delete_seconds: float, volume_seconds: tuple[str, ...],
             token_lifetime: float, agent_poll_interval: float, no_agent: bool,
             execute_scripts: bool, script_user: str, script_timeout: float,
             script_output_limit: int, allow_remote: bool,
             control_token: str | None) -> None:
    """Serve a simulated OpenStack cloud (Keystone, Nova, Neutron, Cinder, Glance) that
    openstacksdk and the openstack CLI accept; faults are set under /_sim/."""
    require_simulated_cloud("convergence simcloud", "serves the simulated cloud")
    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise click.UsageError(
            f"refusing to listen on {host}: anyone who reaches this address could sign in as "
            "the seed's users (admin/admin by default) and change the cloud through /_sim/. "
            "Listen on a loopback address (127.0.0.1, ::1, localhost), or pass "
            "--allow-remote to serve it anyway (/_sim/ then wants a control token).")

    import yaml

    from convergence_simcloud.agent_scripts import run_as
    from convergence_simcloud.control_auth import HEADER
    from convergence_simcloud.seed import Seed, seed_from_mapping
    from convergence_simcloud.serve import clouds_yaml, serve
    from convergence_simcloud.state import Options, SimCloud

    account = None
    if execute_scripts:
        try:
            account = run_as(script_user)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--script-user") from None
    generated = remote and not control_token
    if generated:
        control_token = secrets.token_urlsafe(24)

    seed = Seed()
    if seed_file is not None:
        try:
            seed = seed_from_mapping(yaml.safe_load(seed_file.read_text()) or {})
        except (yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise click.UsageError(f"{seed_file}: not a seed: {exc}") from None
    options = Options(token_lifetime=token_lifetime, build_seconds=build_seconds,
                      server_delete_seconds=server_delete_seconds, state_file=state_file,
                      agent_enabled=not no_agent, agent_poll_interval=agent_poll_interval,
                      agent_script_timeout=script_timeout,
                      agent_execute_scripts=execute_scripts, agent_script_user=script_user,
                      agent_output_limit=script_output_limit,
                      control_token=control_token or None)
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

    if execute_scripts:
        log.warning("simcloud: the software-configuration agent EXECUTES the script configs "
                    "of deployments on this host, as %s, for at most %g s each",
                    account.name if account is not None else "this command's own user",
                    script_timeout)
    if remote:
        log.warning("simcloud: listening on %s, off loopback: anyone who reaches it can sign "
                    "in as the seed's users; /_sim/ wants the control token", host)

    def ready(url: str) -> None:
        click.echo(f"# simcloud listening on {url}", err=True)
        if generated:
            click.echo(f"# simcloud control token (send it as {HEADER} to /_sim/): "
                       f"{control_token}", err=True)
        click.echo(clouds_yaml(url, options.region), nl=False)
        sys.stdout.flush()

    if not serve(cloud, host, port, on_ready=ready):
        sys.exit(STARTUP_FAILURE)
