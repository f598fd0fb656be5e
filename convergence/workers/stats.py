"""Figures a worker process writes for benchmarks: statements, transactions, tasks, memory.

Enabled by ``CONVERGENCE_STATS_DIR`` (``Settings.stats_dir``): the worker's life
(``convergence.workers.process``) starts :func:`start_exporting` in each process that runs
steps, which writes ``<pid>.json`` there twice a second; the benchmark
(``benchmarks/distributed.py``) adds the files up at phase boundaries. Off by default; costs
nothing then.
"""

from __future__ import annotations

import json
import os
import resource
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from convergence.store.metrics import StatementCounter


def start_exporting(db_engine: object, folder: str,
                    tasks: Callable[[], Mapping[str, int]]) -> None:
    """Write this process's figures to ``folder`` on a daemon thread, for as long as it lives.
    ``tasks``: the process's task counts so far (``executed``, ``sent``)."""
    counter = StatementCounter(db_engine)  # type: ignore[arg-type]
    path = Path(folder) / f"{os.getpid()}.json"

    def loop() -> None:
        while True:
            counts = counter.snapshot()
            done = tasks()
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({
                "statements": counts.statements, "transactions": counts.transactions,
                "executed": done["executed"], "sent": done["sent"],
                "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }))
            tmp.replace(path)
            threading.Event().wait(0.5)

    threading.Thread(target=loop, name="worker-stats", daemon=True).start()
