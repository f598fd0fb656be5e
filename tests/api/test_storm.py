"""The autoscaler storm on the embedded tier (scenario 6 of the overlapping updates).

A real ``convergence api`` process on a SQLite file (``tests.api_process.running_api``: the
API steps the work on its in-process dispatcher, on the real clock) and three clients, each
with an HTTP client of its own, sending 50 PATCHes of the group's ``count`` (0..40) over about
10 s. The end state must be the last accepted request's, from the API and from the test
entities; no member may have been created more often than the requests required. See
``tests/storm.py``; how soon the stack converges is printed by ``benchmarks/storm.py``, never
asserted here (the timeout is only a guard against a stuck stack).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests import storm
from tests.api_process import running_api

STUCK_SECONDS = 120.0


def test_required_creations() -> None:
    """Initial create, then one creation each time ``count > i`` turns true, in generation
    order (the order the requests were sent in does not matter)."""
    sent = [storm.Sent(0, 5, 202, 3, 0.0), storm.Sent(1, 30, 202, 4, 0.0),
            storm.Sent(2, 0, 202, 2, 0.0), storm.Sent(0, 7, 409, None, 0.0)]
    result = storm.Storm("t", "g", "id", members=40, initial=20, sent=sent)
    assert [s.count for s in result.accepted] == [0, 5, 30]  # 20 -> 0 -> 5 -> 30
    required = result.required()
    assert required["m0"] == required["m4"] == 2  # initial, then back at 5
    assert required["m5"] == required["m19"] == 2  # initial, then back at 30
    assert required["m20"] == required["m29"] == 1  # first at 30
    assert required["m30"] == required["m39"] == 0


def test_template_count_drives_the_members(tmp_path: Path) -> None:
    """count=3 creates m0..m2 only: the conditions (yaql on the parameter) drive the group."""
    with running_api(tmp_path) as base, httpx.Client(base_url=base, timeout=60) as client:
        stack_id = storm.create_group(client, "storm", "three", count=3,
                                      timeout=STUCK_SECONDS)
        resources = client.get(f"/v1/storm/stacks/three/{stack_id}/resources").json()
        entities = storm.entity_rows(f"sqlite:///{tmp_path / 'api.db'}", stack_id)
    assert sorted(r["resource_name"] for r in resources["resources"]) == ["m0", "m1", "m2"]
    assert sorted(value for _, value, deleted in entities if deleted is None) == \
        ["m0", "m1", "m2"]


def test_autoscaler_storm(tmp_path: Path) -> None:
    with running_api(tmp_path) as base:
        result = storm.run_storm(base, f"sqlite:///{tmp_path / 'api.db'}", seed=6,
                                 timeout=STUCK_SECONDS)
    print(storm.summary(result))
    assert storm.problems(result) == [], storm.summary(result)
