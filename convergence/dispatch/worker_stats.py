"""Figures a worker process writes for benchmarks: statements, transactions, tasks, memory.

Enabled by ``CONVERGENCE_STATS_DIR``: the worker writes ``<pid>.json`` there twice a second,
and the benchmark adds the files up at phase boundaries. Off by default; costs nothing then.
"""

from __future__ import annotations

import json
import os
import resource
import threading
from pathlib import Path

from convergence.store.metrics import StatementCounter

TASKS = {"executed": 0, "sent": 0}


def start_exporting(db_engine: object, folder: str) -> None:
    counter = StatementCounter(db_engine)  # type: ignore[arg-type]
    path = Path(folder) / f"{os.getpid()}.json"

    def loop() -> None:
        while True:
            counts = counter.snapshot()
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({
                "statements": counts.statements, "transactions": counts.transactions,
                "executed": TASKS["executed"], "sent": TASKS["sent"],
                "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }))
            tmp.replace(path)
            threading.Event().wait(0.5)

    threading.Thread(target=loop, name="worker-stats", daemon=True).start()
