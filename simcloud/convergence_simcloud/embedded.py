"""The simulated cloud the embedded mode starts for itself when no cloud is configured.

Callers: ``convergence.runtime`` hands the OpenStack plugins a fallback that calls
:func:`start` the first time a resource needs a cloud and none is named (no ``OS_CLOUD``, no
``OS_*`` variables), so ``make demo`` and the quick start need nothing set up. The cloud is
served in this process on a free loopback port, its state kept in a file beside the embedded
database (so a stack made by one command is still in the cloud for the next), and a
``clouds.yaml`` naming it (``simcloud``) is written beside it; the answer is the environment
that names that entry, as a user would set it.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from convergence_simcloud.serve import CLOUD_NAME, clouds_yaml, running
from convergence_simcloud.state import Options, SimCloud

_lock = threading.Lock()


@dataclass(frozen=True)
class Started:
    """A simulated cloud serving in this process: its base URL (its ``/_sim/`` control plane
    is there too) and the environment naming its ``clouds.yaml`` entry."""

    url: str
    environ: dict[str, str]
    stop: Callable[[], None]  # stop serving and save (also done at exit, if not before)


def start(folder: Path, build_seconds: float = 1.0) -> Started:
    """Serve a simulated cloud kept in ``folder`` (``simcloud.json``) until the process ends."""
    with _lock:
        folder.mkdir(parents=True, exist_ok=True)
        cloud = SimCloud(options=Options(state_file=folder / "simcloud.json",
                                         build_seconds=build_seconds))
        stack = contextlib.ExitStack()
        url = stack.enter_context(running(cloud))

        def stop() -> None:
            atexit.unregister(stop)
            stack.close()

        # At exit: the server stopped and the state saved (a save may still be due).
        atexit.register(stop)
        config = folder / "clouds.yaml"
        config.write_text(clouds_yaml(url))
        return Started(url, {"OS_CLOUD": CLOUD_NAME, "OS_CLIENT_CONFIG_FILE": str(config)},
                       stop)
