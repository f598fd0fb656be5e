"""What the whole suite shares: how its tests are spread over processes.

``make test`` runs the suite in two processes (pytest-xdist, ``--dist loadgroup``). The tiers
that start processes of their own (``tests/faults``: private PostgreSQL, Redis and workers;
``tests/integration``: a session's cluster of workers) form one group, run one after the
other in one process, while the other process takes the in-process tests; so at most one
cluster of workers runs at a time and the integration tier starts its cluster once. Databases
on the shared PostgreSQL server are per process (``tests.conftest_services.own_name``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROCESS_TIERS = (HERE / "faults", HERE / "integration")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.path.is_relative_to(tier) for tier in PROCESS_TIERS):
            item.add_marker(pytest.mark.xdist_group("processes"))
