"""What the whole suite shares: which tests start processes of their own.

The tiers that start processes of their own (``tests/faults``: private PostgreSQL, Redis and
workers; ``tests/integration``: a session's cluster of workers) are marked ``processes``.
``make test`` runs the other tests in two processes (pytest-xdist), then these alone, one
after the other, so that their workers' timing is never squeezed by other tests. Databases on
the shared PostgreSQL server are per process (``tests.conftest_services.own_name``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROCESS_TIERS = (HERE / "faults", HERE / "integration")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.path.is_relative_to(tier) for tier in PROCESS_TIERS):
            item.add_marker(pytest.mark.processes)
