"""The Celery dispatcher's own logic, without a broker: the worker app's delivery guarantees
and ``drive``, which runs a message's work and what follows it inline for a short while.

The real thing (Redis, worker processes) is tested in ``tests/integration``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from convergence.dispatch.celery_dispatch import (
    PLAN_QUEUE,
    STEP_QUEUE,
    TASK_NAME,
    drive,
    make_celery,
)
from convergence.ports.work import FINISH, NODES, PLAN, Work
from convergence.settings import Settings
from convergence.workers.app import make_worker_app

SETTINGS = Settings(database_url="sqlite://", broker_url="redis://127.0.0.1:6379/15")


def test_the_app_delivers_at_least_once_json_only_without_results() -> None:
    app = make_worker_app(SETTINGS)  # make_celery's app, with the worker's tasks
    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json" and list(conf.accept_content) == ["json"]
    assert conf.task_ignore_result and not conf.result_backend
    assert conf.broker_transport_options["visibility_timeout"] >= 600
    assert {q.name: q.routing_key for q in conf.task_queues} == {
        PLAN_QUEUE: PLAN_QUEUE, STEP_QUEUE: STEP_QUEUE}
    assert TASK_NAME in app.tasks


def test_no_broker_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="CONVERGENCE_BROKER_URL"):
        make_celery(Settings(database_url="sqlite://"))


class Recorder:
    """Stands in for the engine and the broker: what ran here, what was sent, what retried."""

    def __init__(self, follow: dict[Work, list[Work]], fail: set[Work] | None = None) -> None:
        self.follow = follow
        self.fail = fail or set()
        self.ran: list[Work] = []
        self.sent: list[Work] = []
        self.retried: list[tuple[Work, int]] = []

    def execute(self, work: Work) -> list[Work]:
        self.ran.append(work)
        if work in self.fail:
            raise RuntimeError("database gone")
        return self.follow.get(work, [])

    def send(self, work: Sequence[Work]) -> None:
        self.sent.extend(work)

    def retry(self, work: Work, attempt: int) -> None:
        self.retried.append((work, attempt))


PLAN_T = Work(PLAN, "t")
WAVE = [Work(NODES, "t", (1, 2)), Work(NODES, "t", (3,))]
POLL = Work(NODES, "t", (4,), countdown=0.5, expects=(7,))
FIN = Work(FINISH, "t")


def test_one_follow_up_runs_inline_the_others_go_to_the_broker_at_once() -> None:
    r = Recorder({PLAN_T: [*WAVE, POLL], WAVE[0]: [FIN]})
    drive(r.execute, r.send, r.retry, PLAN_T)
    assert r.ran == [PLAN_T, WAVE[0], FIN]
    assert sorted(r.sent, key=repr) == sorted([WAVE[1], POLL], key=repr)
    assert r.retried == []


def test_delayed_work_is_never_run_inline() -> None:
    r = Recorder({PLAN_T: [POLL]})
    drive(r.execute, r.send, r.retry, PLAN_T)
    assert r.ran == [PLAN_T] and r.sent == [POLL]


def test_when_the_budget_is_spent_everything_goes_to_the_broker() -> None:
    ticks = iter(range(100))
    r = Recorder({PLAN_T: WAVE})
    drive(r.execute, r.send, r.retry, PLAN_T, budget=0.5, monotonic=lambda: next(ticks))
    assert r.ran == [PLAN_T] and r.sent == WAVE


def test_a_long_first_item_still_goes_on_with_one_follow_up() -> None:
    # The budget counts from the end of the first item (a plan of 10,000 resources takes
    # longer than the budget, and its first batch should not queue behind other work).
    late = iter([1000.0] * 10)
    r = Recorder({PLAN_T: WAVE})
    drive(r.execute, r.send, r.retry, PLAN_T, budget=0.5, monotonic=lambda: next(late))
    assert r.ran == [PLAN_T, WAVE[0]] and r.sent == WAVE[1:]


def test_a_failure_inline_retries_that_work_and_keeps_what_was_sent() -> None:
    r = Recorder({PLAN_T: WAVE}, fail={WAVE[0]})
    drive(r.execute, r.send, r.retry, PLAN_T, attempt=2)
    assert r.sent == [WAVE[1]]
    assert r.retried == [(WAVE[0], 1)]  # attempts count per work item


def test_a_failure_of_the_message_itself_counts_its_attempts() -> None:
    r = Recorder({}, fail={PLAN_T})
    drive(r.execute, r.send, r.retry, PLAN_T, attempt=2)
    assert r.retried == [(PLAN_T, 3)] and r.sent == []


def test_a_stopping_worker_sends_its_follow_ups_instead_of_going_on() -> None:
    # SIGTERM: the step in hand finishes; what it released goes to the other workers.
    r = Recorder({PLAN_T: WAVE})
    drive(r.execute, r.send, r.retry, PLAN_T, stopping=lambda: True)
    assert r.ran == [PLAN_T] and r.sent == WAVE
