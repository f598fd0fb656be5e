"""``convergence simcloud``: serve the simulated OpenStack cloud and print its ``clouds.yaml``.

Registered (lazily) on the ``convergence`` group by ``convergence.cli``; the simulated cloud,
FastAPI and uvicorn are imported when the command runs. ``--state FILE`` keeps the cloud's
state in a JSON file (loaded at start, saved on each change and at shutdown); ``--seed FILE``
(YAML or JSON, see ``convergence.simcloud.seed.seed_from_mapping``) adds users, projects and
application credentials; ``--token-lifetime`` is how long a token lives; ``--build-seconds`` how
long a server stays in BUILD. Once listening it prints a ``clouds.yaml`` entry named
``simcloud`` (region ``RegionOne``) for the admin user.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

STARTUP_FAILURE = 3  # as ``convergence api``: the server could not start (port in use)


@click.command("simcloud")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Keep the cloud's state in this JSON file.")
@click.option("--seed", "seed_file", type=click.Path(exists=True, dir_okay=False,
                                                     path_type=Path),
              default=None, help="Users, projects and application credentials (YAML/JSON).")
@click.option("--build-seconds", default=1.0, show_default=True, type=float,
              help="How long a server stays in BUILD.")
@click.option("--token-lifetime", default=3600.0, show_default=True, type=float,
              help="How long a token is valid, in seconds.")
def simcloud(host: str, port: int, state_file: Path | None, seed_file: Path | None,
             build_seconds: float, token_lifetime: float) -> None:
    """Serve a simulated OpenStack cloud (Keystone v3) that openstacksdk accepts."""
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
                      state_file=state_file)
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
