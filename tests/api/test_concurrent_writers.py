"""Requests on top of each other on the embedded tier: a real ``convergence api`` process on a
SQLite file, several clients at once (``tests/writers.py``).

Two clients PATCH different parameters of one stack 15 times each, at the same time: every
accepted PATCH counts, so both parameters end at their writer's last value, in the stack and
in its resources. Several clients creating one stack name at once get one stack and 409s.
"""

from __future__ import annotations

from pathlib import Path

from tests import writers
from tests.api_process import running_api


def test_two_writers_patching_at_once_lose_nothing(tmp_path: Path) -> None:
    with running_api(tmp_path) as base:
        result = writers.run_two_writers(base, f"sqlite:///{tmp_path / 'api.db'}")
    assert writers.writer_problems(result) == [], result


def test_racing_creates_of_one_name_make_one_stack(tmp_path: Path) -> None:
    with running_api(tmp_path) as base:
        statuses, stacks = writers.race_creates(base)
    assert statuses == [201] + [409] * (len(statuses) - 1)
    assert len(stacks) == 1
