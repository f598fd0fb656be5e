"""The simulated cloud, as the commands that serve it reach it: an optional distribution.

``convergence demo`` and ``convergence simcloud`` call :func:`require_simulated_cloud` before
they import ``convergence_simcloud``. The simulated cloud is a distribution of its own
(``convergence-simcloud``, ``simcloud/`` in the repository) that a production install leaves
out; without it these commands stop with a message saying how to install it, not an import
traceback. (The embedded command line's own fallback cloud says the same through the runtime:
``convergence.runtime.NO_SIMULATED_CLOUD``.)
"""

from __future__ import annotations

import importlib.util

import click

PACKAGE = "convergence_simcloud"
INSTALL = "pip install 'convergence[simcloud]'"


def require_simulated_cloud(command: str, why: str) -> None:
    """Raise a ``click.ClickException`` (exit 1) saying that ``command`` (``why``: what it
    does with the simulated cloud) needs it and how to install it, when it is not installed.
    Looked up, not imported: the command imports what it uses once this passed."""
    if importlib.util.find_spec(PACKAGE) is None:
        raise click.ClickException(f"{command} {why}, which is not installed (the "
                                   f"convergence-simcloud distribution): {INSTALL}")
