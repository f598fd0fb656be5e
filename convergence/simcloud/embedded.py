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
from pathlib import Path

from convergence.simcloud.serve import CLOUD_NAME, clouds_yaml, running
from convergence.simcloud.state import Options, SimCloud

_lock = threading.Lock()


def start(folder: Path, build_seconds: float = 1.0) -> dict[str, str]:
    """Serve a simulated cloud kept in ``folder`` (``simcloud.json``) until the process ends;
    the environment naming its ``clouds.yaml`` entry."""
    with _lock:
        folder.mkdir(parents=True, exist_ok=True)
        cloud = SimCloud(options=Options(state_file=folder / "simcloud.json",
                                         build_seconds=build_seconds))
        stack = contextlib.ExitStack()
        url = stack.enter_context(running(cloud))
        # At exit: the server stopped and the state saved (a save may still be due).
        atexit.register(stack.close)
        config = folder / "clouds.yaml"
        config.write_text(clouds_yaml(url))
        return {"OS_CLOUD": CLOUD_NAME, "OS_CLIENT_CONFIG_FILE": str(config)}
